"""A watch's spend windows: `--max-cost-per-hour` and `--max-cost-per-day`, held to the request.

A scorer says what a call will cost before it is sent (a scorer with a `plan(inputs)` whose `cost`
is the upper estimate of the judge: output tokens at their caps); one without a `plan` spends
nothing. `Capped` wraps the scorer: each call's cost is counted into the current windows (UTC
clock hours and days) before its requests go, and a call whose cost would take a window past its
cap is not sent at all; it is left unscored and counted. Since each call is counted at its upper
estimate before anything is sent, no request goes out after a cap is reached within that window.
The first refusal in a window is said once; when the window rolls over, scoring resumes (and that
is said once too).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tlmscore._cost import dollars
from tlmscore.errors import ConfigError
from tlmscore.model import ScoringInput
from tlmscore.scoring.base import Score, Scorer

OVER_CAP = "over_cost_cap"
"""The `details` key of a call left unscored at a cap (its value: which cap)."""

_WINDOWS = (("hour", "%Y-%m-%dT%H"), ("day", "%Y-%m-%d"))


@dataclass
class Spend:
    """Dollars planned per window (saved in the watch's state as `{window: [period, dollars]}`) and the caps."""

    caps: Mapping[str, float | None]
    windows: dict[str, list[Any]] = field(default_factory=dict)
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)
    said: Callable[[str], None] = lambda _: None
    kept: Callable[[], None] = lambda: None
    """Called once calls are counted in, before their requests go (the watch saves its state)."""
    stopped: dict[str, str] = field(default_factory=dict)

    def _roll(self) -> None:
        """Start a new period of each window whose period has passed (a new hour, a new day)."""
        when = self.now()
        for name, form in _WINDOWS:
            period = when.strftime(form)
            held = self.windows.get(name)
            if held is None or held[0] != period:
                self.windows[name] = [period, 0.0]
                if self.stopped.pop(name, None) is not None:
                    self.said(f"a new {name} began ({period}): model requests resume")

    def spent(self, window: str) -> float:
        """Dollars planned in the window's current period."""
        self._roll()
        return float(self.windows[window][1])

    def admit(self, cost: float) -> str | None:
        """Count `cost` in and return None, or return the cap it would pass (nothing counted)."""
        self._roll()
        for name, _ in _WINDOWS:
            cap = self.caps.get(name)
            if cap is not None and self.windows[name][1] + cost > cap + 1e-12:
                if name not in self.stopped:
                    self.stopped[name] = self.windows[name][0]
                    self.said(f"--max-cost-per-{name} {dollars(cap)} reached ({dollars(self.windows[name][1])} "
                              f"planned this {name}): no model request until the {name} rolls over; "
                              "calls until then are left unscored")
                return f"max-cost-per-{name}"
        for name, _ in _WINDOWS:
            self.windows[name][1] += cost
        return None


def check_capped(scorer: Scorer, caps: Mapping[str, float | None]) -> None:
    """One `ConfigError` line when a cap is set but the scorer knows no price for its model."""
    plan = getattr(scorer, "plan", None)
    if all(cap is None for cap in caps.values()) or plan is None:
        return
    if getattr(plan([]), "cost", None) is None:
        raise ConfigError("--max-cost-per-hour/--max-cost-per-day: no price is known for the scorer's model: "
                          "give price_in and price_out (--price-in, --price-out)")


class Capped:
    """A scorer whose calls are sent only while the spend windows allow; the others come back left unscored."""

    def __init__(self, scorer: Scorer, spend: Spend) -> None:
        self._scorer = scorer
        self._spend = spend
        self._plan = getattr(scorer, "plan", None)
        self.columns: tuple[str, ...] = tuple(getattr(scorer, "columns", ()))

    @property
    def name(self) -> str:
        """The wrapped scorer's name."""
        return self._scorer.name

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """The wrapped scorer's scores of the calls the windows admit, in order; the rest left unscored."""
        refused: dict[int, str] = {}
        for i, item in enumerate(inputs):
            # its plan's upper estimate; nothing without a plan or a price (then no cap is set: checked at start)
            cost = getattr(self._plan([item]), "cost", None) if self._plan is not None else None
            cap = self._spend.admit(0.0 if cost is None else cost)
            if cap is not None:
                refused[i] = cap
        sent = [item for i, item in enumerate(inputs) if i not in refused]
        self._spend.kept()  # what the windows spent is on disk before any request goes
        scores = iter(await self._scorer.score_many(sent) if sent else [])
        return [Score.unscorable(f"left unscored: --{refused[i]} reached", {OVER_CAP: refused[i]})
                if i in refused else next(scores) for i in range(len(inputs))]
