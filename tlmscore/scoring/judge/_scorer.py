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

An answer that did not finish (`ScoringInput.status` other than `completed`, e.g.
`incomplete:max_output_tokens`) is shown to the judge with a note saying so after it, so the judge
rates what was said knowing that the rest is missing; `details["response_status"]` keeps the status.

Requests go through the openai SDK (`tlmscore._chat`), live with `concurrency` in flight, or,
with `batch=True`, through the Batch API (`tlmscore.scoring._judge_batch`) at half the price.
Live verdicts are kept on disk (`tlmscore.scoring._judge_cache`, in `cache_dir`, which a run sets to
`Settings.cache_dir/judge`), keyed by a hash of the messages, model, endpoint and the options that
change a reply: a rerun or a resumed run sends no request twice (`cache=False` turns it off).
Before each set of rows is sent, the number of requests and an estimate of their tokens are
logged (logger `tlmscore.scoring.judge`, level INFO; `plan` gives the same figures as a value).
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tlmscore._chat import ChatClient, open_client
from tlmscore._cost import Budget, dollars, estimate_tokens, price_of
from tlmscore.errors import ScorerError
from tlmscore.model import ScoringInput
from tlmscore.scoring._judge_cache import CachedChat
from tlmscore.scoring._judge_cost import cost_of
from tlmscore.scoring._judge_prompts import (
    AGREEMENT_PROMPT,
    AGREEMENT_WORDS,
    LABELS,
    LETTER_VALUES,
    REFLECTION_PROMPTS,
    REFLECTION_WORDS,
    Rating,
    messages_of,
    parse_rating,
    rate,
)
from tlmscore.scoring.base import Score, ScorerSpec, parse_options, score_rows

if TYPE_CHECKING:
    import openai

__all__ = [
    "AGREEMENT_PROMPT",
    "LETTER_VALUES",
    "REFLECTION_PROMPTS",
    "JudgeOptions",
    "JudgePlan",
    "JudgeScorer",
    "Judged",
    "Rating",
    "create",
    "estimate_tokens",
    "messages_of",
    "parse_rating",
    "rate",
    "status_note",
]

_DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETIRED_OPTIONS = ("backoff", "max_backoff")
_LOG = logging.getLogger(__name__)


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
    retries: int = Field(default=3, ge=0, le=10, description="the SDK's max_retries")
    max_prompt_chars: int | None = Field(default=None, ge=200, description="clip longer prompts in the middle")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="more request fields, sent as is")
    batch: bool = Field(default=False, description="send requests through the Batch API")
    batch_dir: str | None = Field(default=None, description="batch mode: folder of the state, inputs and results")
    poll_interval: float = Field(default=10.0, gt=0, description="batch mode: first wait between polls")
    max_poll_interval: float = Field(default=300.0, gt=0, description="batch mode: longest wait between polls")
    batch_wait: float = Field(default=26 * 3600.0, gt=0, description="batch mode: seconds to wait for results")
    batch_max_requests: int = Field(default=50_000, ge=1, le=50_000, description="batch mode: requests per batch")
    batch_submit_only: bool = Field(default=False, description="batch mode: submit the first round and return "
                                                               "unscored rows; a later run collects")
    cache: bool = Field(default=True, description="keep verdicts in cache_dir and send no request twice")
    cache_dir: str | None = Field(default=None, description="folder of the verdict cache (a run puts it in "
                                                            "Settings.cache_dir/judge); None: no cache")
    price_in: float | None = Field(default=None, ge=0, description="dollars per million input tokens "
                                                                   "(default: the price table's, for known models)")
    price_out: float | None = Field(default=None, ge=0, description="dollars per million output tokens")
    max_cost: float | None = Field(default=None, ge=0, description="refuse to send requests estimated to cost "
                                                                   "more dollars than this")

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data: Any) -> Any:
        """`backoff` and `max_backoff` are the SDK's now: accepted with a warning, not used."""
        if isinstance(data, dict) and any(key in data for key in _RETIRED_OPTIONS):
            warnings.warn("tlmscore: judge options backoff and max_backoff are ignored: the openai SDK's "
                          "backoff (exponential, with jitter, honouring Retry-After) is used",
                          UserWarning, stacklevel=2)
            data = {k: v for k, v in data.items() if k not in _RETIRED_OPTIONS}
        return data

    @model_validator(mode="after")
    def _batch_needs_a_folder(self) -> JudgeOptions:
        if self.batch and not self.batch_dir:
            raise ValueError("batch mode needs batch_dir, the folder that keeps its state for resuming")
        return self


@dataclass(frozen=True)
class JudgePlan:
    """What scoring some rows will ask of the endpoint: requests and an estimate of their tokens.

    Input tokens are estimated from the UTF-8 size of the messages (about 4 bytes a token for
    English; a CJK character counts as 3/4 of a token); output tokens are the `max_tokens` caps.
    """

    rows: int
    requests: int
    input_tokens: int
    max_output_tokens: int
    batch: bool = False
    cost: float | None = None
    """Estimated dollars (output tokens at their caps; Batch API at half price); None: no price known."""

    def describe(self) -> str:
        """One line for a person about to spend them."""
        how = " through the Batch API" if self.batch else ""
        money = (f", at most about {dollars(self.cost)}" if self.cost is not None
                 else " (no price known for this model: give price_in/price_out for a cost estimate)")
        return (f"judge: {self.requests:,} requests{how} for {self.rows:,} rows, about {self.input_tokens:,} "
                f"input tokens and at most {self.max_output_tokens:,} output tokens{money}")


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


@dataclass(frozen=True)
class Judged:
    """One input as the judge sees it: the template fields, characters clipped, the response status."""

    fields: Mapping[str, str]
    clipped: int
    status: str


def status_note(status: str) -> str:
    """The line shown after an answer that did not finish normally (empty for `completed`)."""
    if not status or status == "completed":
        return ""
    kind, _, reason = status.partition(":")
    why = f" ({reason.replace('_', ' ')})" if reason else ""
    if kind == "incomplete":
        return f"\n\n[Note: this answer was cut short{why}; the text above is all there is of it.]"
    return f"\n\n[Note: this answer did not finish normally: its status is {status}.]"


class JudgeScorer:
    """Trust scores from an OpenAI-compatible chat endpoint; see the module docstring for the formula.

    `client` is a caller-owned `openai.AsyncOpenAI` (left open); by default one is built from the
    options for each `score_many` call and closed after it.
    """

    name = "judge"

    def __init__(self, options: JudgeOptions, *, client: openai.AsyncOpenAI | None = None) -> None:
        self.options = options
        self._key = None if client is not None else _api_key(options)
        self._client = client
        self._budget = Budget(options.max_cost, what="judge", model=options.model,
                              prices="price_in and price_out (dollars per million tokens)")

    def judged(self, item: ScoringInput) -> Judged:
        """The fields the prompts are filled with: the prompt clipped, the response with its status note."""
        prompt, clipped = _clip(item.prompt, self.options.max_prompt_chars)
        return Judged({"prompt": prompt, "response": item.response + status_note(item.status)}, clipped, item.status)

    def plan(self, inputs: Sequence[ScoringInput]) -> JudgePlan:
        """Requests and estimated tokens of scoring `inputs` (nothing is sent)."""
        opts = self.options
        per_row = opts.reflections + 2 * opts.samples
        tokens = 0
        for item in inputs:
            fields = self.judged(item).fields
            tokens += sum(estimate_tokens(m["content"]) for i in range(opts.reflections)
                          for m in messages_of(REFLECTION_PROMPTS[i], fields))
            if opts.samples:
                agreement = messages_of(AGREEMENT_PROMPT, {**fields, "other": ""})
                tokens += opts.samples * (estimate_tokens(fields["prompt"]) + opts.sample_max_tokens
                                          + sum(estimate_tokens(m["content"]) for m in agreement))
        output = len(inputs) * (opts.reflections * opts.max_tokens
                                + opts.samples * (opts.sample_max_tokens + opts.max_tokens))
        price = price_of(opts.model, opts.price_in, opts.price_out)
        cost = cost_of(tokens, output, price, batch=opts.batch) if price is not None else None
        return JudgePlan(len(inputs), len(inputs) * per_row, tokens, output, batch=opts.batch, cost=cost)

    def check_cost(self, plan: JudgePlan) -> None:
        """Raise `ConfigError` when `plan`, with what this scorer planned before, would pass `max_cost`."""
        self._budget.check(plan.cost, f"{plan.rows:,} rows")

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """One score per input, live with at most `concurrency` requests in flight, or through the Batch API."""
        if not inputs:
            return []
        opts = self.options
        plan = self.plan(inputs)
        _LOG.info("%s", plan.describe())
        self.check_cost(plan)
        async with AsyncExitStack() as stack:
            client = self._client
            if client is None:
                client = await stack.enter_async_context(
                    open_client(opts.base_url, self._key, timeout=opts.timeout, retries=opts.retries))
            chat = ChatClient(client, opts.model, gate=asyncio.Semaphore(opts.concurrency),
                              top_logprobs=opts.top_logprobs, extra_body=opts.extra_body)
            if opts.batch:
                from tlmscore.scoring._judge_batch import score_batch  # noqa: PLC0415  (batch mode only)

                try:
                    return await score_batch(self, chat, client, inputs)
                except Exception as exc:  # noqa: BLE001  (rows fail, the batch goes on; a rerun resumes)
                    return [Score.failed(f"judge batch mode: {type(exc).__name__}: {exc}") for _ in inputs]
            cached = CachedChat(chat, base_url=opts.base_url, model=opts.model, top_logprobs=opts.top_logprobs,
                                extra_body=opts.extra_body, directory=self.cache_directory)
            try:
                scores = await score_rows(inputs, lambda item: self._score(cached, item),
                                          concurrency=opts.concurrency)
            finally:
                cached.close()
            if cached.hits:
                _LOG.info("judge: %s answers from the verdict cache, %s requests sent", f"{cached.hits:,}",
                          f"{cached.sent:,}")
            return scores

    @property
    def cache_directory(self) -> Path | None:
        """Where verdicts are kept (None when the cache is off or has no folder)."""
        if not self.options.cache or self.options.cache_dir is None:
            return None
        return Path(self.options.cache_dir)

    async def _ask(self, client: CachedChat, prompt: tuple[str, str], fields: Mapping[str, str],
                   words: Sequence[tuple[str, str]]) -> Rating:
        opts = self.options
        completion = await client.complete(messages_of(prompt, fields), temperature=opts.temperature,
                                           max_tokens=opts.max_tokens, logprobs=opts.logprobs)
        return rate(completion, words)

    async def _consistency(self, client: CachedChat, fields: Mapping[str, str]) -> list[Rating]:
        opts = self.options
        answers = await asyncio.gather(*(
            client.complete([{"role": "user", "content": fields["prompt"]}], temperature=opts.sample_temperature,
                            max_tokens=opts.sample_max_tokens, number=i) for i in range(opts.samples)))
        return list(await asyncio.gather(*(
            self._ask(client, AGREEMENT_PROMPT, {**fields, "other": answer.text}, AGREEMENT_WORDS)
            for answer in answers)))

    async def _score(self, client: CachedChat, item: ScoringInput) -> Score:
        judged = self.judged(item)
        reflections = list(await asyncio.gather(*(
            self._ask(client, REFLECTION_PROMPTS[i], judged.fields, REFLECTION_WORDS)
            for i in range(self.options.reflections))))
        agreements = await self._consistency(client, judged.fields) if self.options.samples else []
        return self.combine(judged, reflections, agreements, logprobs=client.logprobs_supported)

    def combine(self, judged: Judged, reflections: list[Rating], agreements: list[Rating], *,
                logprobs: bool) -> Score:
        """The row's score from its ratings (the formula in the module docstring)."""
        beta = self.options.beta
        s, o = _mean(reflections), _mean(agreements)
        details: dict[str, Any] = {
            "model": self.options.model, "self_reflection": s, "observed_consistency": o,
            "beta": beta if o is not None else None, "reflections": [r.as_detail() for r in reflections],
            "agreements": [a.as_detail() for a in agreements], "logprobs_available": logprobs,
            "prompt_chars_omitted": judged.clipped, "response_status": judged.status,
        }
        if s is None:
            replies = "; ".join(repr(r.raw[:40]) for r in reflections)
            return Score.unscorable(f"the judge gave no readable rating ({replies})", details)
        trust = s if o is None else beta * o + (1 - beta) * s
        explanation = _explain(reflections, agreements, s, o)
        if judged.status not in ("", "completed"):
            explanation += f"; the answer did not finish ({judged.status}), and the judge was told"
        return Score(min(max(trust, 0.0), 1.0), explanation, details)


def _explain(reflections: Sequence[Rating], agreements: Sequence[Rating], s: float, o: float | None) -> str:
    labels = ", ".join(LABELS[r.letter] if r.letter else "unreadable" for r in reflections)
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


SPEC = ScorerSpec("judge", spending=frozenset({"cache", "cache_dir", "price_in", "price_out", "max_cost"}),
                  cache="cache_dir", submit_ahead="batch", submit_only="batch_submit_only")
"""What a run asks of the judge: a resumed run may change what it spends; its verdict cache sits
beside the page cache; in Batch API mode every row's requests are submitted before any is collected."""


def create(options: Mapping[str, Any]) -> JudgeScorer:
    """The registry's factory: a `JudgeScorer` from option keywords (`model` is required)."""
    return JudgeScorer(parse_options(JudgeOptions, options, "judge"))
