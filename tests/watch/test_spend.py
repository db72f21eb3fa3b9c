"""The spend windows: no request past a cap within a window, said once, resumed when the window rolls over."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
from collections.abc import Sequence

import pytest

from tlmscore.errors import ConfigError
from tlmscore.model import ScoringInput
from tlmscore.scoring import get_scorer
from tlmscore.scoring.base import Score
from tlmscore.watch import OVER_CAP, Capped, Spend, check_capped

INPUTS = [ScoringInput(prompt=f"User: question {n}\n\nAssistant:", response=f"answer {n}") for n in range(10)]


class Priced:
    """A scorer whose every call costs `price` and is counted as a request when sent."""

    name = "priced"

    def __init__(self, price: float | None) -> None:
        self.price = price
        self.sent: list[ScoringInput] = []

    def plan(self, inputs: Sequence[ScoringInput]) -> object:
        return type("Plan", (), {"cost": None if self.price is None else self.price * len(inputs)})()

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        self.sent.extend(inputs)
        return [Score(0.9) for _ in inputs]


class Clock:
    def __init__(self) -> None:
        self.at = dt.datetime(2026, 1, 1, 10, 59, tzinfo=dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.at


def test_no_request_is_sent_past_the_hourly_cap_it_is_said_once_and_resumes_the_next_hour() -> None:
    clock, said = Clock(), []
    spend = Spend({"hour": 0.35, "day": None}, now=clock, said=said.append)
    priced = Priced(0.1)
    capped = Capped(priced, spend)
    scores = asyncio.run(capped.score_many(INPUTS[:5]))
    assert len(priced.sent) == 3  # 0.3 <= 0.35 < 0.4
    assert [s.details.get(OVER_CAP) for s in scores] == [None, None, None, "max-cost-per-hour", "max-cost-per-hour"]
    assert all(math.isnan(s.score) for s in scores[3:])
    asyncio.run(capped.score_many(INPUTS[5:7]))
    assert len(priced.sent) == 3
    assert len(said) == 1
    assert "--max-cost-per-hour $0.35 reached" in said[0]
    clock.at += dt.timedelta(minutes=2)  # 11:01: a new hour
    asyncio.run(capped.score_many(INPUTS[7:]))
    assert len(priced.sent) == 6
    assert "a new hour began" in said[1]
    assert spend.spent("hour") == pytest.approx(0.3)
    assert spend.spent("day") == pytest.approx(0.6)


def test_the_daily_cap_holds_across_hours_and_the_spend_is_kept_in_the_saved_windows() -> None:
    clock = Clock()
    windows: dict[str, list[object]] = {}
    priced = Priced(0.1)
    kept: list[tuple[int, float]] = []  # (requests sent, dollars counted) each time the windows are saved
    spend = Spend({"hour": None, "day": 0.25}, windows, now=clock,
                  kept=lambda: kept.append((len(priced.sent), float(windows["day"][1]))))
    asyncio.run(Capped(priced, spend).score_many(INPUTS[:2]))
    assert kept == [(0, pytest.approx(0.2))]  # counted and saved before the requests went
    clock.at += dt.timedelta(hours=2)
    again = Spend({"hour": None, "day": 0.25}, windows, now=clock)  # a restart reads the saved windows
    asyncio.run(Capped(priced, again).score_many(INPUTS[2:4]))
    assert len(priced.sent) == 2
    assert windows["day"] == ["2026-01-01", pytest.approx(0.2)]
    clock.at += dt.timedelta(days=1)
    asyncio.run(Capped(priced, again).score_many(INPUTS[4:6]))
    assert len(priced.sent) == 4


def test_a_scorer_that_declares_no_plan_spends_nothing_and_a_cap_without_a_price_is_refused() -> None:
    spend = Spend({"hour": 0.0, "day": 0.0})
    offline = get_scorer("grounding")
    scores = asyncio.run(Capped(offline, spend).score_many(INPUTS[:2]))
    assert all(OVER_CAP not in s.details for s in scores)
    check_capped(Priced(0.1), {"hour": 1.0})
    check_capped(Priced(None), {"hour": None, "day": None})
    with pytest.raises(ConfigError, match="no price is known"):
        check_capped(Priced(None), {"hour": 1.0})
