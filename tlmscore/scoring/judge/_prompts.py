"""The judge's prompts and how its replies are read: a letter A/B/C, valued by its token probabilities.

See `tlmscore.scoring.judge` for the scoring recipe these serve.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tlmscore._chat import Completion

LETTER_VALUES: Mapping[str, float] = MappingProxyType({"A": 1.0, "B": 0.0, "C": 0.5})
LABELS: Mapping[str, str] = MappingProxyType({"A": "correct", "B": "incorrect", "C": "unsure"})
LANGUAGE_NOTE = ("The request, its evidence and the answer may be in any language, not always the same one. "
                 "Judge the answer in its own language and keep the evidence in its language: read it as written, "
                 "without translating it; a different language alone is no error. Whatever the language, reply "
                 "with the Latin letter A, B or C.\n\n")
"""Told to the judge in every rating prompt, before the question."""
REFLECTION_PROMPTS = (
    ("You are a careful fact checker.",
     "Below is a conversation with an AI assistant, then the assistant's proposed answer.\n\n"
     "<conversation>\n{prompt}\n</conversation>\n\n<proposed_answer>\n{response}\n</proposed_answer>\n\n"
     + LANGUAGE_NOTE
     + "Is the proposed answer correct and supported by the conversation? Reply with one letter only:\n"
     "A) correct\nB) incorrect\nC) not sure"),
    ("You grade answers strictly.",
     "Question and context:\n{prompt}\n\nSomeone answered:\n{response}\n\n"
     + LANGUAGE_NOTE
     + "How do you rate this answer? A: it is accurate. B: it contains an error or an unsupported claim. "
     "C: I cannot tell.\nRespond with the single letter A, B or C."),
    ("You review the work of an assistant.",
     "Request:\n{prompt}\n\nResponse under review:\n{response}\n\n"
     + LANGUAGE_NOTE
     + "Check every statement of the response against the request and its context. Does the response "
     "contain a factual error?\nA) no error, the response is right\nB) yes, it has an error\n"
     "C) unsure\nAnswer with A, B or C only."),
)
AGREEMENT_PROMPT = (
    "You compare answers.",
    "Two answers to the same request follow.\n\nRequest:\n{prompt}\n\nAnswer 1:\n{response}\n\n"
    "Answer 2:\n{other}\n\n"
    + LANGUAGE_NOTE
    + "Do the two answers state the same facts and reach the same conclusion? "
    "Reply with one letter only:\nA) yes, they agree\nB) no, they contradict each other\nC) not sure",
)
REFLECTION_WORDS = (("B", r"\b(?:incorrect|not correct|wrong|inaccurate)\b"),
                     ("C", r"\b(?:not sure|unsure|cannot tell|can't tell|uncertain)\b"),
                     ("A", r"\b(?:correct|accurate|right)\b"))
AGREEMENT_WORDS = (("B", r"\b(?:contradict\w*|disagree\w*|differ\w*)\b"),
                    ("C", r"\b(?:not sure|unsure|cannot tell|uncertain)\b"),
                    ("A", r"\b(?:agree\w*|same|consistent)\b"))
_LEADING_LETTER = re.compile(r"^[\s*_(\[\"'`>#-]*(?:(?i:answer|rating|choice|option)\s*(?:is)?\s*[:\-]?\s*)?"
                             r"[\s*_(\[\"']*([ABC])(?![A-Za-z])")
_STATED_LETTER = re.compile(r"\b(?i:answer|rating|choice|option)\s*(?:is)?\s*[:\-]?\s*\(?\**([ABC])\b")
_LETTER_WRAPPING = " \t\n*_()[]:.\"'`"

@dataclass(frozen=True)
class Rating:
    """One rating by the judge: the letter read (None when unreadable), its value and how it was valued."""

    letter: str | None
    value: float
    from_logprobs: bool
    raw: str

    def as_detail(self) -> dict[str, Any]:
        """A JSON-able summary for `Score.details`."""
        return {"rating": LABELS.get(self.letter or ""), "value": round(self.value, 4),
                "from_logprobs": self.from_logprobs, "raw": self.raw[:80]}


def _read_letter(text: str) -> str | None:
    for pattern in (_LEADING_LETTER, _STATED_LETTER):
        found = pattern.search(text)
        if found:
            return found.group(1).upper()
    return None


def parse_rating(text: str, words: Sequence[tuple[str, str]] = REFLECTION_WORDS) -> str | None:
    """The letter A, B or C a reply gives: a leading letter, "answer: X", or else the words it uses."""
    letter = _read_letter(text)
    if letter is not None:
        return letter
    lowered = text.lower()
    return next((letter for letter, word in words if re.search(word, lowered)), None)


def _letter_of(token: str) -> str | None:
    stripped = token.strip(_LETTER_WRAPPING).upper()
    return stripped if stripped in LETTER_VALUES else None


def _expected(completion: Completion, letter: str) -> float | None:
    """The rating's value under the judge's probabilities of A/B/C at the rating token, if known."""
    token = next((t for t in completion.tokens if _letter_of(t.token) == letter), None)
    if token is None:
        return None
    mass = dict.fromkeys(LETTER_VALUES, 0.0)
    for alternative, logprob in token.top or ((token.token, token.logprob),):
        if (other := _letter_of(alternative)) is not None:
            mass[other] += math.exp(logprob)
    if mass[letter] == 0.0:
        mass[letter] = math.exp(token.logprob)
    total = sum(mass.values())
    return sum(mass[k] * LETTER_VALUES[k] for k in mass) / total


def rate(completion: Completion, words: Sequence[tuple[str, str]] = REFLECTION_WORDS) -> Rating:
    """A judge's reply as a `Rating`; unreadable replies count as unsure, flagged by `letter=None`.

    Token probabilities weigh the rating only when the reply gave it as a letter, so the
    probabilities read are those of the letter's own position.
    """
    letter = _read_letter(completion.text)
    expected = _expected(completion, letter) if letter is not None else None
    if expected is not None:
        return Rating(letter, expected, from_logprobs=True, raw=completion.text)
    letter = letter or parse_rating(completion.text, words)
    return Rating(letter, LETTER_VALUES[letter or "C"], from_logprobs=False, raw=completion.text)


def messages_of(prompt: tuple[str, str], fields: Mapping[str, str]) -> list[dict[str, str]]:
    """The chat messages of one of the judge's prompt templates filled with `fields`."""
    system, template = prompt
    return [{"role": "system", "content": system}, {"role": "user", "content": template.format(**fields)}]
