"""`tlmscore compare`: two real scored runs of the labelled fixtures, the gates, every report format."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

import tlmscore
from tests.support.paths import ROOT
from tests.support.tables import json_lines, write_table
from tlmscore import Settings
from tlmscore.cli import main
from tlmscore.compare import compare_rows
from tlmscore.errors import ConfigError
from tlmscore.output import read_rows

FIXTURES = ROOT / "fixtures" / "labelled"
DROPPED = ("oresund-faithful-1", "python-3.12-faithful-1", "nimbus-pricing-faithful-2",
           "expenses-faithful-1", "flight-faithful-2")


@pytest.fixture(scope="module")
def scored(labelled_scores: Path) -> Path:
    """A real `tlmscore score` run of the labelled fixtures, offline, with their saved pages."""
    return labelled_scores


def _dropped(scored: Path, target: Path, keys: tuple[str, ...] = DROPPED, by: float = 0.4) -> Path:
    rows = json_lines(scored)
    for row in rows:
        if row["id"] in keys:
            row["score"] = round(row["score"] - by, 6)
            row["explanation"] = "changed prompt: " + row["explanation"]
    return write_table(target, rows)


def test_unchanged_run_passes(scored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    again = write_table(tmp_path / "new.jsonl", json_lines(scored))
    report = tmp_path / "report.md"
    assert main(["compare", str(scored), str(again), "--max-drop", "0.05", "--report", str(report)]) == 0
    assert "all gates hold" in report.read_text(encoding="utf-8")
    assert "gate max-drop: pass" in capsys.readouterr().err


def test_five_rows_dropped_fail_max_drop_and_the_report_names_them(scored: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    new = _dropped(scored, tmp_path / "new.jsonl")
    report = tmp_path / "report.md"
    assert main(["compare", str(scored), str(new), "--max-drop", "0.05", "--report", str(report)]) == 1
    text = report.read_text(encoding="utf-8")
    assert "gate failed**: max-drop" in text
    assert "5 rows dropped more than 0.05" in text
    base = {r["id"]: r for r in json_lines(scored)}
    dropped_section = text.split("### Dropped (5)")[1].split("###")[0]
    for key in DROPPED:
        line = next(line for line in dropped_section.splitlines() if f"`{key}`" in line)
        assert f"| {base[key]['score']:.3f} | {base[key]['score'] - 0.4:.3f} | -0.400 | changed prompt: " in line
    assert "gate max-drop: FAIL" in capsys.readouterr().err


def test_summary_appends_markdown_to_a_file_of_any_name(scored: Path, tmp_path: Path) -> None:
    summary = tmp_path / "step_summary_1234"
    summary.write_text("earlier step\n", encoding="utf-8")
    new = _dropped(scored, tmp_path / "new.jsonl")
    assert main(["compare", str(scored), str(new), "--max-drop", "0.05", "--summary", str(summary)]) == 1
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n## tlmscore compare")
    assert all(f"`{key}`" in text for key in DROPPED)


def test_a_drop_within_the_limit_passes(scored: Path, tmp_path: Path) -> None:
    new = _dropped(scored, tmp_path / "new.jsonl", by=0.04)
    assert main(["compare", str(scored), str(new), "--max-drop", "0.05"]) == 0
    assert main(["compare", str(scored), str(new), "--max-drop", "0.03"]) == 1


def test_a_missing_input_is_a_usage_error(scored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.jsonl"
    assert main(["compare", str(scored), str(missing), "--max-drop", "0.05"]) == 2
    assert capsys.readouterr().err.strip() == f"tlmscore: error: {missing}: no such file"


def test_no_common_rows_is_a_usage_error(scored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = write_table(tmp_path / "other.jsonl", [{**r, "id": "x-" + r["id"]} for r in json_lines(scored)])
    assert main(["compare", str(scored), str(other)]) == 2
    assert "share no 'id'" in capsys.readouterr().err


def test_a_bad_line_names_file_and_line(scored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text(scored.read_text(encoding="utf-8") + '{"id": "cut off', encoding="utf-8")
    assert main(["compare", str(scored), str(broken)]) == 2
    assert f"tlmscore: error: {broken}:26: not a row: invalid JSON" in capsys.readouterr().err


def test_a_duplicate_key_is_a_usage_error(scored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = json_lines(scored)
    twice = write_table(tmp_path / "twice.jsonl", [*rows, rows[3]])
    assert main(["compare", str(scored), str(twice)]) == 2
    assert f"id '{rows[3]['id']}' appears more than once" in capsys.readouterr().err


def test_by_groups_and_the_json_and_junit_reports(scored: Path, tmp_path: Path) -> None:
    new = _dropped(scored, tmp_path / "new.jsonl")
    json_report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    assert main(["compare", str(scored), str(new), "--by", "model", "--max-drop", "0.05",
                 "--report", str(json_report), "--report", str(junit)]) == 1
    data = json.loads(json_report.read_text(encoding="utf-8"))
    assert data["ok"] is False
    assert set(data["gates"][0]["keys"]) == set(DROPPED)
    models = {r["model"]: r["id"] for r in json_lines(scored)}
    assert set(data["groups"]) == set(models)
    assert sum(g["dropped"] for g in data["groups"].values()) == 5
    assert sum(g["rows"] for g in data["groups"].values()) == 25
    suites = {s.get("name"): s for s in ET.parse(junit).getroot()}  # noqa: S314 -- our own report
    rows = suites["tlmscore.compare.rows"]
    assert (rows.get("tests"), rows.get("failures")) == ("25", "5")
    failed = {case.get("name") for case in rows if case.find("failure") is not None}
    assert failed == set(DROPPED)
    assert [c.get("name") for c in suites["tlmscore.compare.gates"]] == ["max-drop"]


def test_an_unknown_report_suffix_is_a_usage_error(scored: Path, tmp_path: Path) -> None:
    assert main(["compare", str(scored), str(scored), "--report", str(tmp_path / "r.txt")]) == 2
    with pytest.raises(ConfigError, match="no 'name' column"):
        compare_rows(list(read_rows(scored)), list(read_rows(scored)), key="name")


def _settings(tmp_path: Path, demo_path: Path) -> Settings:
    return Settings(offline=True, cache_dir=tmp_path / "c", page_files=(demo_path.parent / "pages",), progress=False)


def test_compare_on_two_prepare_outputs_is_no_pass(tmp_path: Path, demo_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prepared.jsonl"
    tlmscore.run([demo_path], out, settings=_settings(tmp_path, demo_path))
    assert main(["compare", str(out), str(out), "--fail-under", "0.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no row is scored on both sides" in err[0] and "--allow-empty" in err[0]
    assert main(["compare", str(out), str(out), "--fail-under", "0.1", "--allow-empty"]) == 0
