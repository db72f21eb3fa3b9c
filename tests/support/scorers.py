"""Scorers the tests hand to a run: importable by name, so worker processes can rebuild them from a pickle."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from tlmscore.model import ScoringInput
from tlmscore.scoring.base import Score


class WhereScorer:
    """A CPU-bound scorer that says, in each score's details, which process scored the row and its place.

    With `die_in_worker`, a worker process given a slice ends at once, as one killed mid-chunk would; with
    `seconds`, each call takes that long, as real scoring does (so a pool's slices go to different workers).
    """

    name = "where"
    cpu_bound = True

    def __init__(self, die_in_worker: bool = False, seconds: float = 0.0) -> None:
        self.parent = os.getpid()
        self.die_in_worker = die_in_worker
        self.seconds = seconds

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        if self.die_in_worker and os.getpid() != self.parent:
            os._exit(3)
        time.sleep(self.seconds)
        return [Score(0.5, "here", {"pid": os.getpid(), "response": item.response}) for item in inputs]
