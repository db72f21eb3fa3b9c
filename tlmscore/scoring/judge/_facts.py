"""The judge's claims mode: each claim asked about once, with the evidence it needs, scored by P(yes).

For every answer sentence that makes a claim (the sentences and evidence the `grounding` scorer
checks: `GroundingScorer.claim_passages`), one request: a strict fact checker's system message, and
`PASSAGE: … CLAIM: … Is the claim supported by the passage?`, answered in one token. Where the
endpoint returns log-probabilities, the claim's value is P(yes), the probability of the first
token's "yes" forms (`Yes`, ` yes`, `YES`, …) normalised over its "yes" and "no" forms among the
top alternatives; otherwise (or when neither form is among them) the reply's first word: yes = 1,
no = 0. A reply that says neither is unreadable: it counts as 0.5 and is flagged, and a row whose
every reply is unreadable is NaN with the replies in its explanation.

The row's score weighs its weakest claim as `grounding` does: `0.3 * mean + 0.7 * min`.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tlmscore._chat import Completion
from tlmscore.scoring.base import Score
from tlmscore.scoring.grounding import ClaimPassage
from tlmscore.scoring.judge._cache import CachedChat
from tlmscore.scoring.judge._prompts import messages_of

FACT_PROMPT = (
    "You are a strict fact checker. Given a PASSAGE and a CLAIM, answer Yes only if the passage states or "
    "directly implies everything in the claim, including every number, date and polarity. If the passage "
    "contradicts the claim, or does not mention it, answer No. Reply with one word: Yes or No.",
    "PASSAGE: {passage}\n\nCLAIM: {claim}\n\nIs the claim supported by the passage?",
)
"""The system message and the user message's template (fields `passage` and `claim`)."""
MEAN_SHARE = 0.3
UNREADABLE = 0.5
_FIRST_WORD = re.compile(r"[A-Za-z]+")
_WORDS = {"yes": 1.0, "no": 0.0}


@dataclass(frozen=True)
class Verdict:
    """The judge on one claim: P(yes) (None when unreadable), and whether it came from log-probabilities."""

    claim: str
    value: float | None
    from_logprobs: bool
    raw: str
    passage_chars: int

    def as_detail(self) -> dict[str, Any]:
        """A JSON-able summary for `Score.details`."""
        return {"claim": self.claim[:200], "p_yes": None if self.value is None else round(self.value, 4),
                "from_logprobs": self.from_logprobs, "raw": self.raw[:40], "passage_chars": self.passage_chars}


def fact_messages(claim: str, passage: str) -> list[dict[str, str]]:
    """The chat messages asking whether `passage` supports `claim`."""
    return messages_of(FACT_PROMPT, {"passage": passage, "claim": claim})


def _word(token: str) -> str | None:
    found = _FIRST_WORD.search(token)
    word = found.group(0).lower() if found else ""
    return word if word in _WORDS else None


def p_yes(completion: Completion) -> tuple[float | None, bool]:
    """P(yes) of a one-word verdict and whether log-probabilities gave it; (None, False) when unreadable."""
    if completion.tokens:
        first = completion.tokens[0]
        mass = dict.fromkeys(_WORDS, 0.0)
        seen: set[str] = set()
        for token, logprob in (*first.top, (first.token, first.logprob)):
            if token not in seen and (word := _word(token)) is not None:
                seen.add(token)
                mass[word] += math.exp(logprob)
        if mass["yes"] + mass["no"] > 0:
            return mass["yes"] / (mass["yes"] + mass["no"]), True
    word = _word(completion.text.strip()[:12])
    return (None, False) if word is None else (_WORDS[word], False)


async def verdicts(chat: CachedChat, found: Sequence[ClaimPassage], *, temperature: float, max_tokens: int,
                   logprobs: bool) -> list[Verdict]:
    """One request per claim, all at once (the client's gate bounds what is in flight)."""
    completions = await asyncio.gather(*(
        chat.complete(fact_messages(c.claim, c.passage), temperature=temperature, max_tokens=max_tokens,
                      logprobs=logprobs) for c in found))
    return [Verdict(c.claim, *p_yes(done), raw=done.text, passage_chars=len(c.passage))
            for c, done in zip(found, completions, strict=True)]


def verdict_score(found: Sequence[Verdict], details: dict[str, Any]) -> Score:
    """The row's score from its claims' verdicts (`0.3 * mean + 0.7 * min`; unreadable ones count 0.5)."""
    details = {**details, "claims": [v.as_detail() for v in found]}
    if all(v.value is None for v in found):
        replies = "; ".join(repr(v.raw[:40]) for v in found)
        return Score.unscorable(f"the judge gave no readable verdict ({replies})", details)
    values = [UNREADABLE if v.value is None else v.value for v in found]
    score = MEAN_SHARE * sum(values) / len(values) + (1 - MEAN_SHARE) * min(values)
    weakest = min(range(len(values)), key=values.__getitem__)
    supported = sum(1 for v in values if v >= UNREADABLE)
    how = ("from token probabilities" if any(v.from_logprobs for v in found)
           else "from the verdict text (no token probabilities)")
    text = (f"{supported} of {len(values)} claims supported by the evidence, P(yes) {how}; weakest: "
            f"“{found[weakest].claim[:160]}” ({values[weakest]:.2f})")
    unreadable = sum(1 for v in found if v.value is None)
    if unreadable:
        text += f"; {unreadable} unreadable verdict{'s' if unreadable != 1 else ''} counted as unsure"
    return Score(min(max(score, 0.0), 1.0), text, details)
