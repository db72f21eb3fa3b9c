"""The grounding scorer's options, held by what they change: `min_words`, `max_listed` and `messages`."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from tlmscore.model import Evidence, ScoringInput
from tlmscore.scoring import Score, get_scorer

TOOL = Evidence("tool", "The museum opens on Sundays.", call_id="c1", tool="lookup")
USER_SAYS = "The ferry leaves the harbour at nine every morning."


def grounding(response: str, evidence: tuple[Evidence, ...] = (TOOL,), **options: Any) -> Score:
    item = ScoringInput(prompt="User: When does the ferry leave?\n\nAssistant:", response=response, evidence=evidence)
    (score,) = asyncio.run(get_scorer("grounding", options).score_many([item]))
    return score


# ---------------------------------------------------------------- grounding options


@pytest.mark.parametrize(("min_words", "claims"), [(2, 3), (3, 2), (4, 1)])
def test_min_words_is_the_content_words_a_sentence_needs_to_be_a_claim(min_words: int, claims: int) -> None:
    # content words: 2, 3 and 4, and no number or name in any sentence
    score = grounding("Ferries sail. Large boats float. Grey gulls circle harbours.", min_words=min_words)
    assert score.details["claims"] == claims


def test_min_words_above_every_sentence_leaves_nothing_to_check() -> None:
    score = grounding("Ferries sail. Boats float.", min_words=3)
    assert math.isnan(score.score) and "no statement to check" in score.explanation


@pytest.mark.parametrize("limit", [0, 1, 2, 20])
def test_max_listed_caps_the_unsupported_claims_listed_not_the_counts(limit: int) -> None:
    score = grounding("Zebras paint violet murals in Oslo. Penguins drive taxis through Lima. "
                      "Owls compose symphonies in Quito.", max_listed=limit)
    assert (score.details["claims"], score.details["supported"]) == (3, 0)
    assert len(score.details["unsupported"]) == min(limit, 3)
    assert len(score.details["support_by_claim"]) == 3


@pytest.mark.parametrize(("policy", "counted"), [("none", 0), ("context", 0), ("system", 0), ("all", 1)])
def test_only_messages_all_makes_a_user_message_evidence(policy: str, counted: int) -> None:
    score = grounding(USER_SAYS, (TOOL, Evidence("message", USER_SAYS, origin="user")), messages=policy)
    assert score.details["evidence"]["messages"] == counted
    assert score.details["supported"] == counted
    assert score.score == (1.0 if counted else 0.0)


def test_messages_context_and_system_count_a_system_message() -> None:
    system = Evidence("message", USER_SAYS, origin="system")
    for policy in ("context", "system", "all"):
        assert grounding(USER_SAYS, (TOOL, system), messages=policy).details["supported"] == 1
    assert grounding(USER_SAYS, (TOOL, system), messages="none").details["supported"] == 0


# ---------------------------------------------------------------- what the judge sends


# ---------------------------------------------------------------- the command line


# ---------------------------------------------------------------- what the tlm scorer sends Cleanlab


# ---------------------------------------------------------------- Ray's refusals, before Ray starts
