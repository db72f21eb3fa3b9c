"""`tlmscore calibrate`, and `score --calibration`."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES
from tlmscore.cli import main
from tlmscore.scoring import calibration

LABELLED = FIXTURES / "labelled"


@pytest.fixture(scope="module")
def scored(labelled_scores: Path) -> Path:
    """A real `tlmscore score` run of the labelled fixtures, offline, with their saved pages."""
    return labelled_scores


@pytest.mark.parametrize("folds", [2, 3])
def test_calibrate_folds_is_the_number_of_held_out_folds(scored: Path, tmp_path: Path, folds: int,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    calib = tmp_path / "calib.json"
    assert main(["calibrate", str(scored), "--labels", "label", "--labels-from", str(LABELLED / "labelled.jsonl"),
                 "--positive", "faithful", "--folds", str(folds), "-o", str(calib)]) == 0
    assert json.loads(calib.read_text(encoding="utf-8"))["validation"]["folds"] == folds
    assert f"({folds} folds)" in capsys.readouterr().err


def test_cli_calibrate_then_score_with_calibration(scored: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    calib = tmp_path / "calib.json"
    assert main(["calibrate", str(scored), "--labels", "label", "--labels-from", str(LABELLED / "labelled.jsonl"),
                 "--positive", "faithful", "-o", str(calib)]) == 0
    captured = capsys.readouterr()
    assert "held-out bin" in captured.out and "expected calibration error" in captured.err
    saved = json.loads(calib.read_text())
    assert saved["scorer"] == "grounding" and saved["rows"] == 25 and saved["positives"] == 10
    assert saved["validation"]["ece_calibrated"] < saved["validation"]["ece_raw"]

    out = tmp_path / "again.jsonl"
    assert main(["score", str(LABELLED / "labelled.jsonl"), "-o", str(out), "--offline", "--quiet",
                 "--pages", str(LABELLED / "pages"), "--cache-dir", str(tmp_path / "cache"),
                 "--calibration", str(calib)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 25 and all(0 <= r["calibrated_score"] <= 1 for r in rows)
    by_score = sorted(rows, key=lambda r: r["score"])
    assert all(a["calibrated_score"] <= b["calibrated_score"] for a, b in itertools.pairwise(by_score))
    first = [json.loads(line) for line in scored.read_text().splitlines()]
    assert [r["score"] for r in rows] == [r["score"] for r in first]  # the contract's columns are unchanged


def test_calibrated_score_is_a_number_in_parquet_written_in_parts(scored: Path, tmp_path: Path) -> None:
    import pandas as pd

    calib = tmp_path / "calib.json"
    calibration.save(calibration.fit([0.3, 0.4, 0.6, 0.8], [0, 0, 1, 1], scorer="grounding"), calib)
    out = tmp_path / "out.parquet"
    assert main(["score", str(LABELLED / "labelled.jsonl"), "-o", str(out), "--offline", "--quiet", "--chunk-size", "7",
                 "--pages", str(LABELLED / "pages"), "--cache-dir", str(tmp_path / "cache"),
                 "--calibration", str(calib)]) == 0
    frame = pd.read_parquet(out)
    assert len(frame) == 25 and frame["calibrated_score"].dtype == "float64"
    assert frame["calibrated_score"].between(0, 1).all()


def test_cli_refuses_a_calibration_of_another_scorer(scored: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    calib = tmp_path / "judge.json"
    calibration.save(calibration.fit([0.1, 0.9], [0, 1], scorer="judge"), calib)
    code = main(["score", str(LABELLED / "labelled.jsonl"), "-o", str(tmp_path / "x.jsonl"), "--offline",
                 "--quiet", "--cache-dir", str(tmp_path / "cache"), "--calibration", str(calib)])
    assert code == 2
    assert "fitted for the 'judge' scorer, not for 'grounding'" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_cli_calibrate_reads_a_label_column_and_names_missing_ones(scored: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    labels = {json.loads(line)["id"]: json.loads(line)["metadata"]["label"] == "faithful"
              for line in (LABELLED / "labelled.jsonl").read_text().splitlines()}
    with_labels = tmp_path / "with_labels.jsonl"
    rows = [json.loads(line) for line in scored.read_text().splitlines()]
    with_labels.write_text("".join(json.dumps({**r, "correct": labels[r["id"]]}) + "\n" for r in rows))
    assert main(["calibrate", str(with_labels), "--labels", "correct", "--method", "platt",
                 "-o", str(tmp_path / "c.json")]) == 0
    assert calibration.load(tmp_path / "c.json").method == "platt"
    assert main(["calibrate", str(scored), "--labels", "nope", "-o", str(tmp_path / "d.json")]) == 2
    assert "no column 'nope'" in capsys.readouterr().err
