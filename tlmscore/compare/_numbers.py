"""How the reports write a figure (three decimals, signed for a difference; a rate as a percentage; n/a for NaN).

`summary_figures` lists the figures every report shows, so the reports cannot disagree on them.
"""

from __future__ import annotations

import math

from tlmscore.compare._diff import Comparison


def figure(value: float, *, signed: bool = False) -> str:
    """A score or a difference of scores: `0.512`, `+0.031`; `n/a` when there is none."""
    if math.isnan(value):
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def percent(value: float) -> str:
    """A rate: `12.5%`; `n/a` when there is none."""
    return "n/a" if math.isnan(value) else f"{value:.1%}"


def summary_figures(comparison: Comparison, key: str, method: str = "") -> list[tuple[str, str]]:
    """The figures every report shows, as (what, value); `key` is the join column as the report writes it."""
    s = comparison.summary
    ci = s.mean_delta
    return [
        (f"rows compared (joined on {key})", f"{s.rows} ({s.paired} scored on both sides)"),
        ("mean score", f"{figure(s.base_mean)} → {figure(s.new_mean)}"),
        ("mean difference", f"{figure(ci.mean, signed=True)} ({ci.confidence:.0%} CI {figure(ci.low, signed=True)} "
                            f"to {figure(ci.high, signed=True)}{method})"),
        ("dropped / rose", f"{s.dropped} / {s.rose}"),
        ("crossed the threshold down / up", f"{s.newly_flagged} / {s.newly_passing}"),
        ("new errors / newly unscored / fixed", f"{s.new_errors} / {s.newly_unscored} / {s.fixed_errors}"),
        ("only in base / only in new", f"{len(comparison.only_base)} / {len(comparison.only_new)}"),
    ]
