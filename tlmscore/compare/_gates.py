"""The gates of `tlmscore compare`: each holds or fails with a reason a reviewer can act on.

- `max_drop`: no row's score drops by more than D; a row scored before and not scorable now fails it too.
- `fail_under`: the new run's mean score (over rows scored on both sides) is at least X.
- `max_flagged_rate`: at most R of the new run's scored rows are below the threshold.
- `min_delta`: the interval of the mean difference does not lie below M (its upper end is ≥ M).

No data is not a pass: when no row is scored on both sides (two `prepare` outputs, every row an
error), the gates asked for give one result saying so, which fails unless `allow_empty`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tlmscore.compare._diff import Comparison, RowChange
from tlmscore.compare._numbers import figure, percent


@dataclass(frozen=True)
class Gates:
    """The limits asked for; None leaves a gate out."""

    max_drop: float | None = None
    fail_under: float | None = None
    max_flagged_rate: float | None = None
    min_delta: float | None = None
    allow_empty: bool = False
    """Let a comparison with no row scored on both sides pass its gates (it has nothing to gate)."""

    def given(self) -> bool:
        """Whether any gate is asked for."""
        return any(v is not None for v in (self.max_drop, self.fail_under, self.max_flagged_rate, self.min_delta))


NO_DATA = "no row is scored on both sides: nothing to gate"


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
    """The verdict of every gate given, in a fixed order (one failing `scored rows` result when there is no data)."""
    if gates.given() and not comparison.summary.paired:
        return [GateResult("scored rows", gates.allow_empty, NO_DATA + (" (allowed)" if gates.allow_empty else ""))]
    results: list[GateResult] = []
    if gates.max_drop is not None:
        results.append(_max_drop(comparison, gates.max_drop))
    summary = comparison.summary
    if gates.fail_under is not None:
        mean = summary.new_mean
        ok = not math.isnan(mean) and mean >= gates.fail_under
        results.append(GateResult("fail-under", ok,
                                  f"new mean {figure(mean)} {'≥' if ok else '<'} {gates.fail_under:g} "
                                  f"over {summary.paired} rows scored on both sides"))
    if gates.max_flagged_rate is not None:
        rate = summary.new_flagged_rate
        ok = not math.isnan(rate) and rate <= gates.max_flagged_rate
        results.append(GateResult("max-flagged-rate", ok,
                                  f"{percent(rate)} of the new run's scored rows are below {comparison.threshold:g} "
                                  f"({'≤' if ok else '>'} {percent(gates.max_flagged_rate)})"))
    if gates.min_delta is not None:
        ci = summary.mean_delta
        ok = not math.isnan(ci.high) and ci.high >= gates.min_delta
        results.append(GateResult("min-delta", ok,
                                  f"mean difference {figure(ci.mean, signed=True)}, {ci.confidence:.0%} interval "
                                  f"[{figure(ci.low, signed=True)}, {figure(ci.high, signed=True)}] "
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
        parts.append(f"worst {worst.key} {figure(worst.base)} → {figure(worst.new)}")
    if broken:
        parts.append(f"{broken} rows became not scorable")
    return GateResult("max-drop", ok=False, reason="; ".join(parts), keys=tuple(r.key for r in failed))
