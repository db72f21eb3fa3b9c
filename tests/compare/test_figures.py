"""The figures the gates and reports read, each exactly: the summary's counts and means, the row lists'
thresholds and order, `--by` groups, the bootstrap against a plain reading of its definition, the defaults."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tlmscore.compare import Gates, Interval, Summary, check_gates, compare_rows, paired_bootstrap
from tlmscore.errors import ConfigError

BASE = [{"id": "a", "score": 0.5, "error": None},
        {"id": "b", "score": 0.75, "error": None},
        {"id": "c", "score": 0.25, "error": None},
        {"id": "d", "score": 0.5, "error": "timeout"},  # an error with a score: not scored
        {"id": "e", "score": 0.5, "error": None},
        {"id": "f", "score": 0.25, "error": None},
        {"id": "g", "score": 0.375, "error": None},
        {"id": "h", "score": 0.625, "error": None}]
NEW = [{"id": "a", "score": 0.25, "error": None},  # dropped, newly flagged (from exactly the threshold)
       {"id": "b", "score": 1.0, "error": None},  # rose by 0.25
       {"id": "c", "score": 0.5, "error": None},  # rose by 0.25 to exactly the threshold: newly passing
       {"id": "d", "score": 0.75, "error": None},  # fixed
       {"id": "e", "score": math.nan, "error": None},  # newly unscored (no score, no error)
       {"id": "f", "score": 0.25, "error": None},  # unchanged, flagged on both sides
       {"id": "g", "score": 0.875, "error": None},  # rose by 0.5: newly passing
       {"id": "h", "score": math.nan, "error": "timeout"}]  # a new error


def test_the_summary_figures() -> None:
    comparison = compare_rows(BASE, NEW)
    deltas = [-0.25, 0.25, 0.25, 0.0, 0.5]  # a, b, c, f, g
    assert comparison.summary == Summary(
        rows=8, paired=5, base_mean=(0.5 + 0.75 + 0.25 + 0.25 + 0.375) / 5,
        new_mean=(0.25 + 1.0 + 0.5 + 0.25 + 0.875) / 5,
        mean_delta=paired_bootstrap(deltas, seed=0, resamples=2000), dropped=1, rose=3, newly_flagged=1,
        newly_passing=2, new_errors=1, fixed_errors=1, new_flagged_rate=2 / 6,  # a and f of the six scored now
        newly_unscored=1)


def test_the_row_lists_and_their_order() -> None:
    comparison = compare_rows(BASE, NEW)
    assert [r.key for r in comparison.rose()] == ["g", "b", "c"]  # largest first, ties by key
    assert [r.key for r in comparison.dropped()] == ["a"]
    assert [r.key for r in comparison.newly_flagged()] == ["a"]  # at the threshold before: it passed then
    assert [r.key for r in comparison.newly_passing()] == ["c", "g"]  # c is at the threshold now: it passes
    assert [r.key for r in comparison.new_errors()] == ["h"]
    assert [r.key for r in comparison.newly_unscored()] == ["e"]
    assert [r.key for r in comparison.fixed_errors()] == ["d"]
    assert all(r.group is None for r in comparison.rows)  # no --by, no group
    above = compare_rows([{"id": "x", "score": 0.25, "error": None}], [{"id": "x", "score": 0.75, "error": "late"}])
    assert above.newly_passing() == [] and above.summary.newly_passing == 0  # not scored now: not passing


def test_by_a_column_or_a_metadata_key() -> None:
    base = [{"id": str(i), "score": 0.5, "error": None} for i in range(4)]
    new = [{"id": "0", "score": 0.25, "error": None, "model": "m1"},
           {"id": "1", "score": 0.75, "error": None, "metadata": {"model": "m2"}},
           {"id": "2", "score": 0.5, "error": None, "metadata": {"other": 1}},
           {"id": "3", "score": 0.5, "error": None, "model": "m1", "metadata": {"model": "ignored"}}]
    comparison = compare_rows(base, new, by="model")
    assert [r.group for r in comparison.rows] == ["m1", "m2", "(none)", "m1"]
    assert {name: (g.rows, g.dropped, g.rose) for name, g in comparison.groups.items()} == {
        "(none)": (1, 0, 0), "m1": (2, 1, 0), "m2": (1, 0, 1)}


def test_an_empty_by_value_is_in_the_none_group_and_every_row_is_in_a_group() -> None:
    base = [{"id": str(i), "score": 0.5, "error": None} for i in range(3)]
    new = [{"id": "0", "score": 0.25, "error": None, "model": ""},
           {"id": "1", "score": 0.75, "error": None},
           {"id": "2", "score": 0.5, "error": None, "model": "m1"}]
    comparison = compare_rows(base, new, by="model")
    assert [r.group for r in comparison.rows] == ["(none)", "(none)", "m1"]
    assert {name: (g.rows, g.dropped, g.rose) for name, g in comparison.groups.items()} == {
        "(none)": (2, 1, 1), "m1": (1, 0, 0)}
    assert sum(g.rows for g in comparison.groups.values()) == len(comparison.rows)


def test_the_defaults_and_the_confidence_reach_the_interval() -> None:
    base = [{"id": str(i), "score": (i % 5) / 8, "error": None} for i in range(30)]
    new = [{"id": str(i), "score": ((i * 3) % 7) / 8, "error": None} for i in range(30)]
    deltas = [n["score"] - b["score"] for b, n in zip(base, new, strict=True)]
    assert compare_rows(base, new).summary.mean_delta == paired_bootstrap(deltas, seed=0, resamples=2000)
    assert compare_rows(base, new, threshold=0.5).summary == compare_rows(base, new).summary
    narrow = compare_rows(base, new, confidence=0.5, seed=4, resamples=300).summary.mean_delta
    assert narrow == paired_bootstrap(deltas, seed=4, resamples=300, confidence=0.5)
    assert narrow.confidence == 0.5


@pytest.mark.parametrize(("rows", "resamples"), [(50, 2000), (4001, 2000), (4001, 999)])
def test_the_bootstrap_is_the_percentile_interval_of_seeded_resampled_means(rows: int, resamples: int) -> None:
    """4,001 rows are drawn in blocks of 999 resamples; the result is as if drawn at once."""
    deltas = [((i * 37) % 101) / 100 - 0.5 for i in range(rows)]
    values = np.asarray(deltas)
    means = values[np.random.default_rng(7).integers(0, rows, size=(resamples, rows))].mean(axis=1)
    tail = (1.0 - 0.95) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    assert paired_bootstrap(deltas, seed=7, resamples=resamples) == Interval(float(values.mean()), float(low),
                                                                             float(high), 0.95)


def test_the_bootstraps_own_defaults() -> None:
    deltas = [0.1, -0.2, 0.3, 0.05, -0.1, 0.2]
    assert paired_bootstrap(deltas) == paired_bootstrap(deltas, seed=0, resamples=2000, confidence=0.95)
    empty = paired_bootstrap([], confidence=0.9)
    assert math.isnan(empty.mean) and math.isnan(empty.low) and math.isnan(empty.high)
    assert empty.confidence == 0.9


def test_a_key_twice_names_the_side_and_the_way_out() -> None:
    rows = [{"id": "x", "score": 0.5, "error": None}]
    with pytest.raises(ConfigError) as base_twice:
        compare_rows(rows * 2, rows, names=("old.jsonl", "new.jsonl"))
    assert str(base_twice.value) == ("old.jsonl: id 'x' appears more than once (row 2); "
                                     "join on a unique column with --key")
    with pytest.raises(ConfigError, match=r"^new\.jsonl: id 'x'"):
        compare_rows(rows, rows * 2, names=("old.jsonl", "new.jsonl"))


def test_a_drop_within_the_rounding_allowance_holds() -> None:
    """A drop passes up to `max_drop` plus 1e-12, so a difference of decimals that rounds over it holds."""
    comparison = compare_rows([{"id": "x", "score": 1e-12, "error": None}], [{"id": "x", "score": 0.0, "error": None}])
    assert comparison.rows[0].delta == -1e-12
    assert [r.ok for r in check_gates(comparison, Gates(max_drop=0.0))] == [True]
    over = compare_rows([{"id": "x", "score": 3e-12, "error": None}], [{"id": "x", "score": 0.0, "error": None}])
    assert [r.ok for r in check_gates(over, Gates(max_drop=0.0))] == [False]


def test_landing_exactly_on_the_threshold_passes_and_starting_there_passed() -> None:
    base = [{"id": "down", "score": 0.75, "error": None}, {"id": "up", "score": 0.5, "error": None}]
    new = [{"id": "down", "score": 0.5, "error": None, "explanation": "kept"},
           {"id": "up", "score": 0.75, "error": None}]
    comparison = compare_rows(base, new, key="id", by="model")
    assert comparison.newly_flagged() == [] and comparison.newly_passing() == []
    assert (comparison.summary.newly_flagged, comparison.summary.newly_passing) == (0, 0)
    assert (comparison.key, comparison.by) == ("id", "model")
    assert [r.explanation for r in comparison.rows] == ["kept", None]  # no explanation stays none, not "None"


def test_each_group_has_its_own_seeded_interval_and_no_common_key_names_both_files() -> None:
    base = [{"id": str(i), "score": (i % 5) / 8, "error": None, "model": "m"} for i in range(12)]
    new = [{"id": str(i), "score": ((i * 3) % 7) / 8, "error": None, "model": "m"} for i in range(12)]
    deltas = [n["score"] - b["score"] for b, n in zip(base, new, strict=True)]
    group = compare_rows(base, new, by="model", seed=3, resamples=400).groups["m"]
    assert group.mean_delta == paired_bootstrap(deltas, seed=3, resamples=400)
    with pytest.raises(ConfigError) as none_in_common:
        compare_rows(base, [{"id": "x", "score": 0.5}], names=("old.jsonl", "new.jsonl"))
    assert str(none_in_common.value) == "old.jsonl and new.jsonl share no 'id': nothing to compare"
