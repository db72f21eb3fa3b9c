"""How the reports write a figure: three decimals (signed for a difference), a rate as a percentage, n/a for NaN."""

from __future__ import annotations

import math


def figure(value: float, *, signed: bool = False) -> str:
    """A score or a difference of scores: `0.512`, `+0.031`; `n/a` when there is none."""
    if math.isnan(value):
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def percent(value: float) -> str:
    """A rate: `12.5%`; `n/a` when there is none."""
    return "n/a" if math.isnan(value) else f"{value:.1%}"
