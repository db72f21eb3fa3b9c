"""Each gate of docs/compare.md held at its boundary: which run it reads, which rows it counts, `≥` against `>`.

Scores are exact binary fractions (0.25, 0.625, …) so a mean or a rate lands exactly on a limit; one step of
`math.nextafter` past it must flip the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from tlmscore.compare import Comparison, Gates, check_gates, compare_rows, paired_bootstrap

Score = float | None
"""A row's score; None stands for an error row (score NaN, an error message)."""


def _rows(scores: Sequence[Score]) -> list[dict[str, object]]:
    return [{"id": f"r{i}", "score": math.nan if s is None else s, "error": "failed" if s is None else None}
            for i, s in enumerate(scores)]


def _compare(base: Sequence[Score], new: Sequence[Score], threshold: float = 0.5) -> Comparison:
    return compare_rows(_rows(base), _rows(new), threshold=threshold)


def _verdicts(comparison: Comparison, gates: Gates) -> list[tuple[str, bool, str]]:
    return [(r.name, r.ok, r.reason) for r in check_gates(comparison, gates)]


def _up(value: float) -> float:
    return math.nextafter(value, math.inf)


def _down(value: float) -> float:
    return math.nextafter(value, -math.inf)


# ------------------------------------------------------------------------------------------------ --fail-under


def test_fail_under_reads_the_new_runs_mean_not_the_base_runs() -> None:
    better = _compare([0.25, 0.25], [0.75, 0.75])
    assert _verdicts(better, Gates(fail_under=0.5)) == [
        ("fail-under", True, "new mean 0.750 ≥ 0.5 over 2 rows scored on both sides")]
    worse = _compare([0.75, 0.75], [0.25, 0.25])
    assert _verdicts(worse, Gates(fail_under=0.5)) == [
        ("fail-under", False, "new mean 0.250 < 0.5 over 2 rows scored on both sides")]


def test_fail_under_holds_at_exactly_the_limit_and_fails_just_above_it() -> None:
    comparison = _compare([0.0, 0.0], [0.5, 0.75])  # new mean 0.625 exactly
    assert comparison.summary.new_mean == 0.625
    assert [r.ok for r in check_gates(comparison, Gates(fail_under=0.625))] == [True]
    assert [r.ok for r in check_gates(comparison, Gates(fail_under=_up(0.625)))] == [False]
    assert [r.ok for r in check_gates(comparison, Gates(fail_under=_down(0.625)))] == [True]


def test_fail_under_averages_only_rows_scored_on_both_sides() -> None:
    # r2 is scored only in the new run (an error before) and r3 only in the base run: neither is in the mean
    comparison = _compare([0.5, 0.5, None, 1.0], [0.5, 0.5, 1.0, None])
    assert _verdicts(comparison, Gates(fail_under=0.5)) == [
        ("fail-under", True, "new mean 0.500 ≥ 0.5 over 2 rows scored on both sides")]
    assert [r.ok for r in check_gates(comparison, Gates(fail_under=0.6))] == [False]


# ------------------------------------------------------------------------------------------ --max-flagged-rate


def test_a_score_exactly_at_the_threshold_is_not_flagged() -> None:
    comparison = _compare([0.5] * 4, [0.5, 0.25, 0.75, 1.0])  # one row (0.25) below 0.5: 25%
    assert comparison.summary.new_flagged_rate == 0.25
    assert _verdicts(comparison, Gates(max_flagged_rate=0.25)) == [
        ("max-flagged-rate", True, "25.0% of the new run's scored rows are below 0.5 (≤ 25.0%)")]
    assert _verdicts(comparison, Gates(max_flagged_rate=_down(0.25))) == [
        ("max-flagged-rate", False, "25.0% of the new run's scored rows are below 0.5 (> 25.0%)")]


def test_the_flagged_rate_reads_the_new_run_and_its_threshold() -> None:
    comparison = _compare([0.0] * 4, [0.75] * 4)  # every base row flagged, no new one
    assert [r.ok for r in check_gates(comparison, Gates(max_flagged_rate=0.0))] == [True]
    stricter = _compare([0.0] * 4, [0.75, 0.75, 0.8, 0.9], threshold=0.8)  # 0.75 < 0.8; 0.8 is at it
    assert stricter.summary.new_flagged_rate == 0.5
    assert _verdicts(stricter, Gates(max_flagged_rate=0.5)) == [
        ("max-flagged-rate", True, "50.0% of the new run's scored rows are below 0.8 (≤ 50.0%)")]
    assert [r.ok for r in check_gates(stricter, Gates(max_flagged_rate=0.49))] == [False]


def test_the_flagged_rate_counts_every_scored_row_of_the_new_run_not_only_paired_ones() -> None:
    # r3 was an error in the base run and is flagged now; r4 is an error now and counts in no rate
    comparison = _compare([0.75, 0.75, 0.75, None, 0.75], [0.75, 0.75, 0.75, 0.125, None])
    assert comparison.summary.paired == 3
    assert comparison.summary.new_flagged_rate == 0.25  # 1 of the 4 rows scored in the new run
    assert [r.ok for r in check_gates(comparison, Gates(max_flagged_rate=0.25))] == [True]
    assert [r.ok for r in check_gates(comparison, Gates(max_flagged_rate=0.2))] == [False]


# -------------------------------------------------------------------------------------------------- --min-delta

SPREAD = [(0.25, 0.5), (0.5, 0.5), (0.5, 0.25), (0.25, 0.75), (0.75, 0.625), (0.5, 0.875), (0.875, 0.5),
          (0.125, 0.375)]
"""Base and new scores whose differences spread, so the interval's low end, mean and high end all differ."""


def _spread() -> Comparison:
    return _compare([b for b, _ in SPREAD], [n for _, n in SPREAD])


def test_min_delta_reads_the_upper_end_of_the_interval() -> None:
    comparison = _spread()
    ci = comparison.summary.mean_delta
    assert ci == paired_bootstrap([n - b for b, n in SPREAD], seed=0, resamples=2000)
    assert ci.low < 0 < ci.mean < ci.high
    between = (ci.mean + ci.high) / 2  # above the mean and the low end, below the high end: holds
    assert [r.ok for r in check_gates(comparison, Gates(min_delta=between))] == [True]
    assert [r.ok for r in check_gates(comparison, Gates(min_delta=ci.high))] == [True]
    assert [r.ok for r in check_gates(comparison, Gates(min_delta=_up(ci.high)))] == [False]
    assert _verdicts(comparison, Gates(min_delta=0.5)) == [
        ("min-delta", False, f"mean difference {ci.mean:+.3f}, 95% interval [{ci.low:+.3f}, {ci.high:+.3f}] "
                             "lies below +0.5")]


def test_min_delta_zero_fails_only_a_change_lower_with_confidence() -> None:
    lower = _compare([0.75] * 8, [0.5] * 6 + [0.625, 0.75])  # every row lower or equal: the interval is below 0
    assert lower.summary.mean_delta.high < 0
    assert [r.ok for r in check_gates(lower, Gates(min_delta=0.0))] == [False]
    mixed = _spread()
    assert mixed.summary.mean_delta.low < 0
    assert [r.ok for r in check_gates(mixed, Gates(min_delta=0.0))] == [True]


def test_min_delta_holds_at_an_interval_exactly_on_the_limit() -> None:
    comparison = _compare([0.5] * 5, [0.75] * 5)  # every difference is 0.25: the interval is [0.25, 0.25]
    assert comparison.summary.mean_delta.high == 0.25
    assert _verdicts(comparison, Gates(min_delta=0.25)) == [
        ("min-delta", True, "mean difference +0.250, 95% interval [+0.250, +0.250] reaches +0.25")]
    assert [r.ok for r in check_gates(comparison, Gates(min_delta=_up(0.25)))] == [False]


# --------------------------------------------------------------------------------------------------- --max-drop


def test_a_drop_of_exactly_the_limit_holds_despite_rounding() -> None:
    comparison = _compare([0.8, 0.5], [0.7, 0.5])  # 0.7 - 0.8 is -0.10000000000000009 in binary
    assert -comparison.rows[0].delta > 0.1
    assert _verdicts(comparison, Gates(max_drop=0.1)) == [("max-drop", True, "no row dropped more than 0.1")]
    assert [r.ok for r in check_gates(comparison, Gates(max_drop=0.099))] == [False]


def test_max_drop_names_the_worst_row_and_the_rows_that_became_not_scorable() -> None:
    comparison = _compare([0.75, 0.75, 0.5, 0.75, None, 0.5], [0.5, 0.25, 0.5, None, None, 0.75])
    result = check_gates(comparison, Gates(max_drop=0.2))[0]
    assert (result.name, result.ok) == ("max-drop", False)
    assert result.reason == "2 rows dropped more than 0.2; worst r1 0.750 → 0.250; 1 rows became not scorable"
    assert result.keys == ("r3", "r1", "r0")  # not scorable first, then the largest drop first
    only_broken = check_gates(_compare([0.5, 0.5], [0.5, None]), Gates(max_drop=0.2))[0]
    assert only_broken.reason == "0 rows dropped more than 0.2; 1 rows became not scorable"
    assert only_broken.keys == ("r1",)
    ties = check_gates(_compare([0.75, 0.75], [0.25, 0.25]), Gates(max_drop=0.2))[0]
    assert ties.keys == ("r0", "r1")
    assert ties.reason == "2 rows dropped more than 0.2; worst r0 0.750 → 0.250"


# ---------------------------------------------------------------------------------------------- order, no data


def test_every_gate_given_gives_one_result_in_a_fixed_order() -> None:
    comparison = _compare([0.5, 0.5], [0.75, 0.75])
    every = Gates(min_delta=0.0, max_flagged_rate=0.0, fail_under=0.5, max_drop=0.0)
    assert [(r.name, r.ok) for r in check_gates(comparison, every)] == [
        ("max-drop", True), ("fail-under", True), ("max-flagged-rate", True), ("min-delta", True)]
    assert check_gates(comparison, Gates()) == []


@pytest.mark.parametrize("gates", [Gates(max_drop=0.1), Gates(fail_under=0.1), Gates(max_flagged_rate=1.0),
                                   Gates(min_delta=-1.0)])
def test_any_gate_over_no_scored_rows_fails_unless_allowed(gates: Gates) -> None:
    comparison = _compare([None, 0.5], [0.5, None])
    assert gates.given()
    assert _verdicts(comparison, gates) == [("scored rows", False, "no row is scored on both sides: nothing to gate")]
    allowed = Gates(**{**gates.__dict__, "allow_empty": True})
    assert _verdicts(comparison, allowed) == [
        ("scored rows", True, "no row is scored on both sides: nothing to gate (allowed)")]
    assert not Gates(allow_empty=True).given()
