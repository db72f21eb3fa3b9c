"""The gates of `tlmscore compare`: each holds or fails with a reason a reviewer can act on.

- `max_drop`: no row's score drops by more than D; a row scored before and not scorable now fails it too.
- `fail_under`: the new run's mean score (over rows scored on both sides) is at least X.
- `max_flagged_rate`: at most R of the new run's scored rows are below the threshold.
- `min_delta`: the interval of the mean difference does not lie below M (its upper end is ≥ M).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tlmscore.compare._diff import Comparison, RowChange


@dataclass(frozen=True)
class Gates:
    """The limits asked for; None leaves a gate out."""

    max_drop: float | None = None
    fail_under: float | None = None
    max_flagged_rate: float | None = None
    min_delta: float | None = None


@dataclass(frozen=True)
class GateResult:
    """One gate's verdict, why, and the keys of the rows that broke it (row gates only)."""

    name: str
    ok: bool
    reason: str
    keys: tuple[str, ...] = ()


def row_fails_drop(row: RowChange, max_drop: float) -> bool:
    """The row dropped by more than `max_drop`, or became not scorable."""
    if row.base_scored and not row.new_scored:
        return True
    return not math.isnan(row.delta) and -row.delta > max_drop + 1e-12


def check_gates(comparison: Comparison, gates: Gates) -> list[GateResult]:
    """The verdict of every gate given, in a fixed order."""
    results: list[GateResult] = []
    if gates.max_drop is not None:
        results.append(_max_drop(comparison, gates.max_drop))
    summary = comparison.summary
    if gates.fail_under is not None:
        mean = summary.new_mean
        ok = not math.isnan(mean) and mean >= gates.fail_under
        results.append(GateResult("fail-under", ok, f"new mean {_f(mean)} {'≥' if ok else '<'} {gates.fail_under:g} "
                                  f"over {summary.paired} rows scored on both sides"))
    if gates.max_flagged_rate is not None:
        rate = summary.new_flagged_rate
        ok = not math.isnan(rate) and rate <= gates.max_flagged_rate
        results.append(GateResult("max-flagged-rate", ok,
                                  f"{_pct(rate)} of the new run's scored rows are below {comparison.threshold:g} "
                                  f"({'≤' if ok else '>'} {_pct(gates.max_flagged_rate)})"))
    if gates.min_delta is not None:
        ci = summary.mean_delta
        ok = not math.isnan(ci.high) and ci.high >= gates.min_delta
        results.append(GateResult("min-delta", ok,
                                  f"mean difference {_f(ci.mean, signed=True)}, {ci.confidence:.0%} interval "
                                  f"[{_f(ci.low, signed=True)}, {_f(ci.high, signed=True)}] "
                                  f"{'reaches' if ok else 'lies below'} {gates.min_delta:+g}"))
    return results


def _max_drop(comparison: Comparison, max_drop: float) -> GateResult:
    failed = sorted((r for r in comparison.rows if row_fails_drop(r, max_drop)),
                    key=lambda r: (r.delta if not math.isnan(r.delta) else -math.inf, r.key))
    if not failed:
        return GateResult("max-drop", ok=True, reason=f"no row dropped more than {max_drop:g}")
    broken = sum(not r.new_scored for r in failed)
    worst = next((r for r in failed if not math.isnan(r.delta)), None)
    parts = [f"{len(failed) - broken} rows dropped more than {max_drop:g}"]
    if worst is not None:
        parts.append(f"worst {worst.key} {_f(worst.base)} → {_f(worst.new)}")
    if broken:
        parts.append(f"{broken} rows became not scorable")
    return GateResult("max-drop", ok=False, reason="; ".join(parts), keys=tuple(r.key for r in failed))


def _f(value: float, *, signed: bool = False) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.1%}"
