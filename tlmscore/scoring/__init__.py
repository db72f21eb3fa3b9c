"""Scorers: turn rendered (prompt, response) pairs into scores, one module per scorer.

`get_scorer(name, options)` builds one (`grounding`, `judge`, `tlm`, or a plug-in); every scorer
has `async score_many(inputs) -> list[Score]`.
"""

from __future__ import annotations

from tlmscore.scoring.base import SCORERS, Score, Scorer, get_scorer, scorer_names

__all__ = ["SCORERS", "Score", "Scorer", "get_scorer", "scorer_names"]
