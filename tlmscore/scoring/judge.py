"""`judge`: trust from any OpenAI-compatible chat model, after the BSDetector/TLM recipe.

Chen & Mueller, "Quantifying Uncertainty in Answers from any Language Model" (BSDetector, 2023),
which Cleanlab's TLM builds on, combine two signals; this scorer computes both with the judge model:

- **Self-reflection `S`.** The judge is shown the prompt and the proposed answer and asked, with
  `reflections` (≥ 2) differently worded prompts, to rate it: A) correct = 1, B) incorrect = 0,
  C) unsure = 0.5. When the endpoint returns token log-probabilities, a rating's value is its
  expectation under the judge's probabilities of the three letters at the rating token
  (renormalised over A/B/C); otherwise the rated letter's value. `S` is the mean over prompts.
- **Observed consistency `O`** (optional, `samples = k > 0`). The judge answers the prompt itself
  `k` times at `sample_temperature`; each alternative is compared with the proposed answer
  (A) same facts and conclusion = 1, B) contradicts = 0, C) unsure = 0.5, valued as above), and `O`
  is the mean. BSDetector measures this agreement with an NLI model; here the judge does it.

Trust = `beta * O + (1 - beta) * S` with `beta = 0.7` as in BSDetector when samples are taken,
else `S`.

Unparseable output never becomes an invented score: a rating the parser cannot read counts as
unsure (0.5) and is flagged in `details`; when no rating of an input could be read at all, its
score is NaN with an explanation. Errors after retries (HTTP, timeouts) fail that row only.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field

from tlmscore.errors import ScorerError
from tlmscore.model import ScoringInput
from tlmscore.scoring.base import Score, parse_options, score_rows
from tlmscore.scoring.chat import ChatClient, Completion

__all__ = [
    "AGREEMENT_PROMPT",
    "LETTER_VALUES",
    "REFLECTION_PROMPTS",
    "JudgeOptions",
    "JudgeScorer",
    "Rating",
    "create",
    "parse_rating",
    "rate",
]

LETTER_VALUES: Mapping[str, float] = MappingProxyType({"A": 1.0, "B": 0.0, "C": 0.5})
_LABELS: Mapping[str, str] = MappingProxyType({"A": "correct", "B": "incorrect", "C": "unsure"})
REFLECTION_PROMPTS = (
    ("You are a careful fact checker.",
     "Below is a conversation with an AI assistant, then the assistant's proposed answer.\n\n"
     "<conversation>\n{prompt}\n</conversation>\n\n<proposed_answer>\n{response}\n</proposed_answer>\n\n"
     "Is the proposed answer correct and supported by the conversation? Reply with one letter only:\n"
     "A) correct\nB) incorrect\nC) not sure"),
    ("You grade answers strictly.",
     "Question and context:\n{prompt}\n\nSomeone answered:\n{response}\n\n"
     "How do you rate this answer? A: it is accurate. B: it contains an error or an unsupported claim. "
     "C: I cannot tell.\nRespond with the single letter A, B or C."),
    ("You review the work of an assistant.",
     "Request:\n{prompt}\n\nResponse under review:\n{response}\n\n"
     "Check every statement of the response against the request and its context. Does the response "
     "contain a factual error?\nA) no error, the response is right\nB) yes, it has an error\n"
     "C) unsure\nAnswer with A, B or C only."),
)
AGREEMENT_PROMPT = (
    "You compare answers.",
    "Two answers to the same request follow.\n\nRequest:\n{prompt}\n\nAnswer 1:\n{response}\n\n"
    "Answer 2:\n{other}\n\nDo the two answers state the same facts and reach the same conclusion? "
    "Reply with one letter only:\nA) yes, they agree\nB) no, they contradict each other\nC) not sure",
)
_REFLECTION_WORDS = (("B", r"\b(?:incorrect|not correct|wrong|inaccurate)\b"),
                     ("C", r"\b(?:not sure|unsure|cannot tell|can't tell|uncertain)\b"),
                     ("A", r"\b(?:correct|accurate|right)\b"))
_AGREEMENT_WORDS = (("B", r"\b(?:contradict\w*|disagree\w*|differ\w*)\b"),
                    ("C", r"\b(?:not sure|unsure|cannot tell|uncertain)\b"),
                    ("A", r"\b(?:agree\w*|same|consistent)\b"))
_LEADING_LETTER = re.compile(r"^[\s*_(\[\"'`>#-]*(?:(?i:answer|rating|choice|option)\s*(?:is)?\s*[:\-]?\s*)?"
                             r"[\s*_(\[\"']*([ABC])(?![A-Za-z])")
_STATED_LETTER = re.compile(r"\b(?i:answer|rating|choice|option)\s*(?:is)?\s*[:\-]?\s*\(?\**([ABC])\b")
_LETTER_WRAPPING = " \t\n*_()[]:.\"'`"
_DEFAULT_BASE_URL = "https://api.openai.com/v1"


class JudgeOptions(BaseModel):
    """Options of the `judge` scorer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, description="the judge model's name at the endpoint")
    base_url: str = Field(default=_DEFAULT_BASE_URL, description="the OpenAI-compatible API root, e.g. "
                                                                 "http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(default=None, description="environment variable holding the API key; "
                                                              "default OPENAI_API_KEY, optional for local servers")
    reflections: int = Field(default=2, ge=2, le=len(REFLECTION_PROMPTS))
    samples: int = Field(default=0, ge=0, le=20, description="alternative answers for observed consistency")
    beta: float = Field(default=0.7, ge=0.0, le=1.0, description="weight of observed consistency")
    logprobs: bool = True
    top_logprobs: int = Field(default=5, ge=1, le=20)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="for ratings")
    sample_temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=8, ge=1, description="tokens of a rating")
    sample_max_tokens: int = Field(default=512, ge=1)
    concurrency: int = Field(default=8, ge=1, le=1024, description="requests in flight")
    timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=3, ge=0, le=10)
    backoff: float = Field(default=0.5, ge=0.0)
    max_backoff: float = Field(default=30.0, ge=0.0)
    max_prompt_chars: int | None = Field(default=None, ge=200, description="clip longer prompts in the middle")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="more request fields, sent as is")


@dataclass(frozen=True)
class Rating:
    """One rating by the judge: the letter read (None when unreadable), its value and how it was valued."""

    letter: str | None
    value: float
    from_logprobs: bool
    raw: str

    def as_detail(self) -> dict[str, Any]:
        """A JSON-able summary for `Score.details`."""
        return {"rating": _LABELS.get(self.letter or ""), "value": round(self.value, 4),
                "from_logprobs": self.from_logprobs, "raw": self.raw[:80]}


def _read_letter(text: str) -> str | None:
    for pattern in (_LEADING_LETTER, _STATED_LETTER):
        found = pattern.search(text)
        if found:
            return found.group(1).upper()
    return None


def parse_rating(text: str, words: Sequence[tuple[str, str]] = _REFLECTION_WORDS) -> str | None:
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


def rate(completion: Completion, words: Sequence[tuple[str, str]] = _REFLECTION_WORDS) -> Rating:
    """A judge's reply as a `Rating`; unreadable replies count as unsure, flagged by `letter=None`.

    Token probabilities weigh the rating only when the reply gave it as a letter, so the
    probabilities read are those of the letter's own position.
    """
    letter = _read_letter(completion.text)
    expected = _expected(completion, letter) if letter is not None else None
    if expected is not None and letter is not None:
        return Rating(letter, expected, from_logprobs=True, raw=completion.text)
    letter = letter or parse_rating(completion.text, words)
    if letter is None:
        return Rating(None, LETTER_VALUES["C"], from_logprobs=False, raw=completion.text)
    return Rating(letter, LETTER_VALUES[letter], from_logprobs=False, raw=completion.text)


def _clip(text: str, limit: int | None) -> tuple[str, int]:
    """`text` cut in the middle to `limit` characters (a third from the start, the rest from the end)."""
    if limit is None or len(text) <= limit:
        return text, 0
    head = limit // 3
    tail = limit - head
    omitted = len(text) - limit
    return f"{text[:head]}\n[… {omitted} characters omitted …]\n{text[-tail:]}", omitted


def _api_key(options: JudgeOptions) -> str | None:
    name = options.api_key_env or "OPENAI_API_KEY"
    key = os.environ.get(name)
    if key:
        return key
    if options.api_key_env is not None:
        raise ScorerError(f"judge scorer: the environment variable {name} (api_key_env) is not set")
    if urlsplit(options.base_url).hostname == urlsplit(_DEFAULT_BASE_URL).hostname:
        raise ScorerError("judge scorer: OPENAI_API_KEY is not set (or name another variable with api_key_env)")
    return None


def _mean(ratings: Sequence[Rating]) -> float | None:
    """The mean value, or None when no rating could be read."""
    if not any(r.letter is not None for r in ratings):
        return None
    return sum(r.value for r in ratings) / len(ratings)


class JudgeScorer:
    """Trust scores from an OpenAI-compatible chat endpoint; see the module docstring for the formula."""

    name = "judge"

    def __init__(self, options: JudgeOptions, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.options = options
        self._key = _api_key(options)
        self._transport = transport

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """One score per input, with at most `concurrency` requests in flight."""
        opts = self.options
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        limits = httpx.Limits(max_connections=opts.concurrency, max_keepalive_connections=opts.concurrency)
        timeout = httpx.Timeout(opts.timeout, connect=min(opts.timeout, 10.0))
        async with httpx.AsyncClient(base_url=opts.base_url.rstrip("/") + "/", headers=headers, timeout=timeout,
                                     limits=limits, transport=self._transport) as http:
            client = ChatClient(http, opts.model, gate=asyncio.Semaphore(opts.concurrency), retries=opts.retries,
                                backoff=opts.backoff, max_backoff=opts.max_backoff,
                                top_logprobs=opts.top_logprobs, extra_body=opts.extra_body)
            return await score_rows(inputs, lambda item: self._score(client, item), concurrency=opts.concurrency)

    async def _ask(self, client: ChatClient, prompt: tuple[str, str], fields: Mapping[str, str],
                   words: Sequence[tuple[str, str]]) -> Rating:
        system, template = prompt
        messages = [{"role": "system", "content": system}, {"role": "user", "content": template.format(**fields)}]
        opts = self.options
        completion = await client.complete(messages, temperature=opts.temperature, max_tokens=opts.max_tokens,
                                           logprobs=opts.logprobs)
        return rate(completion, words)

    async def _consistency(self, client: ChatClient, fields: Mapping[str, str]) -> list[Rating]:
        opts = self.options
        answers = await asyncio.gather(*(
            client.complete([{"role": "user", "content": fields["prompt"]}], temperature=opts.sample_temperature,
                            max_tokens=opts.sample_max_tokens) for _ in range(opts.samples)))
        return list(await asyncio.gather(*(
            self._ask(client, AGREEMENT_PROMPT, {**fields, "other": answer.text}, _AGREEMENT_WORDS)
            for answer in answers)))

    async def _score(self, client: ChatClient, item: ScoringInput) -> Score:
        opts = self.options
        prompt, clipped = _clip(item.prompt, opts.max_prompt_chars)
        fields = {"prompt": prompt, "response": item.response}
        reflections = list(await asyncio.gather(*(
            self._ask(client, REFLECTION_PROMPTS[i], fields, _REFLECTION_WORDS) for i in range(opts.reflections))))
        agreements = await self._consistency(client, fields) if opts.samples else []
        return self._combine(reflections, agreements, clipped, client.logprobs_supported)

    def _combine(self, reflections: list[Rating], agreements: list[Rating], clipped: int,
                 logprobs: bool) -> Score:
        beta = self.options.beta
        s, o = _mean(reflections), _mean(agreements)
        details: dict[str, Any] = {
            "model": self.options.model, "self_reflection": s, "observed_consistency": o,
            "beta": beta if o is not None else None, "reflections": [r.as_detail() for r in reflections],
            "agreements": [a.as_detail() for a in agreements], "logprobs_available": logprobs,
            "prompt_chars_omitted": clipped,
        }
        if s is None:
            replies = "; ".join(repr(r.raw[:40]) for r in reflections)
            return Score.unscorable(f"the judge gave no readable rating ({replies})", details)
        trust = s if o is None else beta * o + (1 - beta) * s
        return Score(min(max(trust, 0.0), 1.0), _explain(reflections, agreements, s, o), details)


def _explain(reflections: Sequence[Rating], agreements: Sequence[Rating], s: float, o: float | None) -> str:
    labels = ", ".join(_LABELS[r.letter] if r.letter else "unreadable" for r in reflections)
    text = f"self-reflection {s:.2f} from {len(reflections)} ratings ({labels})"
    unreadable = sum(1 for r in (*reflections, *agreements) if r.letter is None)
    if any(r.from_logprobs for r in (*reflections, *agreements)):
        text += "; weighted by token probabilities"
    if o is not None:
        text += f"; observed consistency {o:.2f} over {len(agreements)} sampled answers"
    elif agreements:
        text += "; no readable agreement rating, consistency left out"
    if unreadable:
        text += f"; {unreadable} unreadable rating{'s' if unreadable != 1 else ''} counted as unsure"
    return text


def create(options: Mapping[str, Any]) -> JudgeScorer:
    """The registry's factory: a `JudgeScorer` from option keywords (`model` is required)."""
    return JudgeScorer(parse_options(JudgeOptions, options, "judge"))
