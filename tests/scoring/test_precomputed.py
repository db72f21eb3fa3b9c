"""`Precomputed`: scores worked out before, looked up by input."""

from __future__ import annotations

import asyncio
import math

from tlmscore.model import ScoringInput
from tlmscore.scoring import Score
from tlmscore.scoring.base import Precomputed, input_key


def test_precomputed_looks_scores_up_by_input_and_fails_an_unknown_one() -> None:
    known = ScoringInput(prompt="p", response="r")
    table = {input_key(ScoringInput(prompt="p", response="r")): Score(0.7, "kept")}  # equal content, same key
    scores = asyncio.run(Precomputed("judge", table).score_many([known, ScoringInput(prompt="p", response="other")]))
    assert scores[0] == Score(0.7, "kept")
    assert math.isnan(scores[1].score) and scores[1].error == "no score was worked out for this input before the run"
