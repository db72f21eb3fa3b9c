"""Fixture folders that guard scores too: recorded with a scorer, checked within a tolerance, in the CLI and
the pytest plugin."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tlmscore.cli import main
from tlmscore.fixtures import GoldenScoring, check_fixtures, golden_scoring, record_fixtures
from tlmscore.pytest_plugin import Snapshot
from tlmscore.settings import Settings

LABELLED = ROOT / "fixtures" / "labelled"
RECORDS = ("oresund-faithful-1", "oresund-contradicted-3", "python-3.12-faithful-2")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Three labelled transcripts with the pages they cite."""
    target = tmp_path / "fx"
    target.mkdir()
    lines = [line for line in (LABELLED / "labelled.jsonl").read_text(encoding="utf-8").splitlines()
             if json.loads(line)["id"] in RECORDS]
    (target / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.copytree(LABELLED / "pages", target / "pages")
    return target


def _golden(folder: Path, record: str) -> Path:
    return folder / "golden" / "cases" / f"{record}.json"


def _nudge(folder: Path, record: str, by: float) -> float:
    """Move a golden score by `by`, as if the scorer or the evidence had changed; returns the real score."""
    path = _golden(folder, record)
    meta = json.loads(path.read_text(encoding="utf-8"))
    real = float(meta["score"])
    meta["score"] = real + by
    path.write_text(json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return real


def test_record_with_a_scorer_keeps_scores_and_check_scores_again(folder: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fixtures", "record", str(folder), "--offline", "--cache-dir", str(tmp_path / "c"),
                 "--scorer", "grounding", "--score-tolerance", "0.01"]) == 0
    assert "scored with grounding (tolerance 0.01)" in capsys.readouterr().err
    assert golden_scoring(folder) == GoldenScoring("grounding", {}, 0.01)
    scores = {r: json.loads(_golden(folder, r).read_text(encoding="utf-8"))["score"] for r in RECORDS}
    assert all(0.0 < s <= 1.0 for s in scores.values())
    assert scores["oresund-faithful-1"] > scores["oresund-contradicted-3"]
    assert main(["fixtures", "check", str(folder)]) == 0


def test_a_score_beyond_the_tolerance_fails_check(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record_fixtures(folder, Settings(offline=True, cache_dir=folder.parent / "c"),
                    scoring=GoldenScoring("grounding", tolerance=0.02))
    real = _nudge(folder, "oresund-faithful-1", 0.015)  # within 0.02
    assert check_fixtures(folder).ok
    _nudge(folder, "oresund-faithful-1", 0.03 - 0.015)  # now 0.03 away
    report = check_fixtures(folder)
    assert report.changed == ["cases.jsonl:1 (oresund-faithful-1)"]
    assert report.diffs[0].startswith("golden/cases/oresund-faithful-1.json: score moved by 0.0300, beyond the "
                                      "tolerance 0.02\n")
    assert check_fixtures(folder, score_tolerance=0.05).ok
    assert main(["fixtures", "check", str(folder)]) == 1
    assert "oresund-faithful-1" in capsys.readouterr().err
    assert main(["fixtures", "check", str(folder), "--update"]) == 0
    assert json.loads(_golden(folder, "oresund-faithful-1").read_text(encoding="utf-8"))["score"] == real
    assert main(["fixtures", "check", str(folder), "--score-tolerance", "0"]) == 0


def test_the_rest_of_the_record_still_matches_exactly(folder: Path) -> None:
    record_fixtures(folder, Settings(offline=True, cache_dir=folder.parent / "c"),
                    scoring=GoldenScoring("grounding", tolerance=0.5))
    path = _golden(folder, "python-3.12-faithful-2")
    meta = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**meta, "n_urls": 99}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    report = check_fixtures(folder)
    assert report.changed == ["cases.jsonl:3 (python-3.12-faithful-2)"]
    assert '-  "n_urls": 99,' in report.diffs[0]


def test_a_folder_without_scores_is_not_scored(folder: Path) -> None:
    record_fixtures(folder, Settings(offline=True, cache_dir=folder.parent / "c"))
    assert golden_scoring(folder) is None
    assert "score" not in json.loads(_golden(folder, "oresund-faithful-1").read_text(encoding="utf-8"))
    assert check_fixtures(folder).ok


def test_the_pytest_plugin_checks_scores_with_a_tolerance(folder: Path) -> None:
    record_fixtures(folder, Settings(offline=True, cache_dir=folder.parent / "c"),
                    scoring=GoldenScoring("grounding"))
    snapshot = Snapshot(update=False)
    snapshot.check(folder)
    _nudge(folder, "oresund-contradicted-3", -0.04)
    with pytest.raises(pytest.fail.Exception, match=r"1 transcripts changed: cases.jsonl:2 \(oresund-contradicted-3\)"):
        snapshot.check(folder)
    snapshot.check(folder, score_tolerance=0.05)


def test_check_refuses_a_scorer_flag(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fixtures", "check", str(folder), "--scorer", "grounding"]) == 2
    assert "--scorer is for record" in capsys.readouterr().err
