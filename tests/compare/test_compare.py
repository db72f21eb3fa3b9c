"""Comparing two scored runs in the library: rows read from any format, errors and rows on one side, the gates,
the seeded bootstrap, the scatter of a big run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import tlmscore
from tests.support.paths import ROOT
from tests.support.tables import json_lines, write_table
from tlmscore import Settings
from tlmscore.compare import Gates, check_gates, compare_rows, paired_bootstrap, render_report
from tlmscore.output import read_rows

FIXTURES = ROOT / "fixtures" / "labelled"


@pytest.fixture(scope="module")
def scored(labelled_scores: Path) -> Path:
    """A real `tlmscore score` run of the labelled fixtures, offline, with their saved pages."""
    return labelled_scores


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_any_output_format_compares_equal_to_jsonl(scored: Path, tmp_path: Path, suffix: str) -> None:
    table = write_table(tmp_path / f"base{suffix}", json_lines(scored))
    comparison = compare_rows(list(read_rows(table)), list(read_rows(scored)))
    assert comparison.summary.paired == 25
    assert comparison.dropped() == comparison.rose() == []
    assert comparison.summary.mean_delta.mean == pytest.approx(0.0, abs=1e-9)


def test_errors_one_side_rows_and_threshold_crossings(scored: Path) -> None:
    base = list(read_rows(scored))
    new = [dict(r) for r in base[:-2]]  # the last two records are only in the base run
    new[0] |= {"score": math.nan, "error": "request failed"}  # scored before, an error now
    new[1] |= {"score": 0.2}  # oresund-faithful-2 crossed 0.5 downwards
    broken = [dict(r) for r in base]
    broken[2] |= {"score": math.nan, "error": "timeout"}  # an error before, scored now
    extra = {**base[0], "id": "only-new"}
    comparison = compare_rows(broken, [*new, extra])
    assert [r.key for r in comparison.new_errors()] == [base[0]["id"]]
    assert [r.key for r in comparison.fixed_errors()] == [base[2]["id"]]
    assert [r.key for r in comparison.newly_flagged()] == [base[1]["id"]]
    assert comparison.only_base == (base[-2]["id"], base[-1]["id"])
    assert comparison.only_new == ("only-new",)
    gate = check_gates(comparison, Gates(max_drop=0.5))[0]
    assert not gate.ok
    assert set(gate.keys) == {base[0]["id"], base[1]["id"]}
    assert "1 rows became not scorable" in gate.reason


def test_aggregate_gates(scored: Path) -> None:
    base = list(read_rows(scored))
    new = [dict(r) | {"score": min(1.0, r["score"] + 0.1)} for r in base]
    comparison = compare_rows(base, new)
    mean = comparison.summary.new_mean
    results = check_gates(comparison, Gates(fail_under=round(mean, 3) - 0.001, max_flagged_rate=1.0,
                                            min_delta=0.05))
    assert [(r.name, r.ok) for r in results] == [("fail-under", True), ("max-flagged-rate", True),
                                                 ("min-delta", True)]
    flagged = sum(r["score"] < 0.5 for r in new) / len(new)
    results = check_gates(comparison, Gates(fail_under=round(mean, 3) + 0.01, max_flagged_rate=flagged - 0.01,
                                            min_delta=0.2))
    assert [(r.name, r.ok) for r in results] == [("fail-under", False), ("max-flagged-rate", False),
                                                 ("min-delta", False)]
    assert "lies below +0.2" in results[2].reason


def test_the_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    deltas = [(-1) ** i * (i % 7) / 20 - 0.01 for i in range(60)]
    first = paired_bootstrap(deltas, seed=3)
    assert first == paired_bootstrap(deltas, seed=3)
    assert first != paired_bootstrap(deltas, seed=4)
    assert first.low < first.mean < first.high
    assert first.mean == pytest.approx(sum(deltas) / 60)
    constant = paired_bootstrap([-0.4] * 5 + [0.0] * 20)
    assert constant.mean == pytest.approx(-0.08)
    assert constant.high < 0 < constant.high + 0.08
    assert math.isnan(paired_bootstrap([]).mean)


def test_the_scatter_of_a_big_run_keeps_every_moved_row_and_a_sample_of_the_rest() -> None:
    base = [{"id": f"r{i}", "score": (i % 100) / 100, "error": None} for i in range(12_000)]
    new = [r | {"score": r["score"] / 2} if i % 500 == 7 else r for i, r in enumerate(base)]
    comparison = compare_rows(base, new)
    page = render_report(".html", comparison, Gates(), [], ("a", "b"))
    scatter = page.split('<svg id="scatter"')[1]
    moved = [r.key for r in comparison.rows if r.delta != 0]
    assert len(moved) == 24
    assert all(f"<title>{key}:" in scatter for key in moved)
    assert 4000 < scatter.count("<circle") <= 5000
    assert f"of {len(base)})" in scatter


def _settings(tmp_path: Path, demo_path: Path) -> Settings:
    return Settings(offline=True, cache_dir=tmp_path / "c", page_files=(demo_path.parent / "pages",), progress=False)


def test_a_gate_over_no_scored_rows_fails_in_the_library(tmp_path: Path, demo_path: Path) -> None:
    out = tmp_path / "prepared.jsonl"
    tlmscore.run([demo_path], out, settings=_settings(tmp_path, demo_path))
    comparison = compare_rows(read_rows(out), read_rows(out))
    results = check_gates(comparison, Gates(fail_under=0.1))
    assert [(r.name, r.ok) for r in results] == [("scored rows", False)]
    assert [(r.name, r.ok) for r in check_gates(comparison, Gates(fail_under=0.1, allow_empty=True))] == [
        ("scored rows", True)]
    assert check_gates(comparison, Gates()) == []
