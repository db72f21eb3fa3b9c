"""The judge scorer itself: `JudgeScorer` (live requests, or the Batch API through `_batch`) and `create`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tlmscore._chat import ChatClient, open_client
from tlmscore._cost import Budget, estimate_tokens, price_of, token_cost
from tlmscore._endpoint import Endpoint
from tlmscore.errors import ScorerError
from tlmscore.model import ScoringInput
from tlmscore.scoring.base import Score, ScorerSpec, parse_options, score_rows
from tlmscore.scoring.grounding import GroundingScorer
from tlmscore.scoring.judge._cache import CachedChat
from tlmscore.scoring.judge._facts import fact_messages, verdict_score, verdicts
from tlmscore.scoring.judge._options import DEFAULT_BASE_URL, Judged, JudgeOptions, JudgePlan
from tlmscore.scoring.judge._prompts import (
    AGREEMENT_PROMPT,
    AGREEMENT_WORDS,
    LABELS,
    REFLECTION_PROMPTS,
    REFLECTION_WORDS,
    Rating,
    messages_of,
    rate,
)

if TYPE_CHECKING:
    import openai


_LOG = logging.getLogger("tlmscore.scoring.judge")


def _clip(text: str, limit: int | None) -> tuple[str, int]:
    """`text` cut in the middle to `limit` characters (a third from the start, the rest from the end)."""
    if limit is None or len(text) <= limit:
        return text, 0
    head = limit // 3
    tail = limit - head
    omitted = len(text) - limit
    return f"{text[:head]}\n[… {omitted} characters omitted …]\n{text[-tail:]}", omitted


def endpoint(options: JudgeOptions) -> Endpoint:
    """The judge's server: its key from `api_key_env`, else `OPENAI_API_KEY`, needed when named or for OpenAI's API."""
    name = options.api_key_env or "OPENAI_API_KEY"
    named = options.api_key_env is not None
    return Endpoint(options.base_url, options.model, key_envs=(name,), error=ScorerError,
                    key_needed=named or urlsplit(options.base_url).hostname == urlsplit(DEFAULT_BASE_URL).hostname,
                    concurrency=options.concurrency,
                    missing=f"judge scorer: the environment variable {name} (api_key_env) is not set" if named else
                    "judge scorer: OPENAI_API_KEY is not set (or name another variable with api_key_env)")


def _mean(ratings: Sequence[Rating]) -> float | None:
    """The mean value, or None when no rating could be read."""
    if not any(r.letter is not None for r in ratings):
        return None
    return sum(r.value for r in ratings) / len(ratings)


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
        self._key = None if client is not None else endpoint(options).key()
        self._client = client
        self._budget = Budget(options.max_cost, what="judge", model=options.model,
                              prices="price_in and price_out (dollars per million tokens)")
        self._grounding = GroundingScorer()  # claims mode: the claims and the evidence each needs

    def judged(self, item: ScoringInput) -> Judged:
        """The fields the prompts are filled with: the prompt clipped, the response with its status note."""
        prompt, clipped = _clip(item.prompt, self.options.max_prompt_chars)
        return Judged({"prompt": prompt, "response": item.response + status_note(item.status)}, clipped, item.status)

    def plan(self, inputs: Sequence[ScoringInput]) -> JudgePlan:
        """Requests and estimated tokens of scoring `inputs` (nothing is sent)."""
        opts = self.options
        if opts.mode == "claims":
            requests, tokens = self._claims_plan(inputs)
            output = requests * opts.rating_tokens
        else:
            requests, tokens = len(inputs) * (opts.reflections + 2 * opts.samples), 0
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
        cost = token_cost(tokens, output, price, batch=opts.batch) if price is not None else None
        return JudgePlan(len(inputs), requests, tokens, output, batch=opts.batch, cost=cost)

    def _claims_plan(self, inputs: Sequence[ScoringInput]) -> tuple[int, int]:
        """Claims mode's requests and input tokens: one request per claim, of its sentence and the evidence it needs."""
        requests = tokens = 0
        for item in inputs:
            found = self._grounding.claim_passages(item, self.options.passage_chars)
            for claim in () if isinstance(found, Score) else found:
                requests += 1
                tokens += sum(estimate_tokens(m["content"]) for m in fact_messages(claim.claim, claim.passage))
        return requests, tokens

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """One score per input, live with at most `concurrency` requests in flight, or through the Batch API."""
        if not inputs:
            return []
        opts = self.options
        plan = self.plan(inputs)
        _LOG.info("%s", plan.describe())
        self._budget.check(plan.cost, f"{plan.rows:,} rows")  # with what was planned before: within max_cost
        async with AsyncExitStack() as stack:
            client = self._client
            if client is None:
                client = await stack.enter_async_context(
                    open_client(opts.base_url, self._key, timeout=opts.timeout, retries=opts.retries))
            chat = ChatClient(client, opts.model, gate=asyncio.Semaphore(opts.concurrency),
                              top_logprobs=opts.alternatives, extra_body=opts.extra_body)
            if opts.batch:
                from tlmscore.scoring.judge._batch import score_batch  # noqa: PLC0415  (batch mode only)

                try:
                    return await score_batch(self, chat, client, inputs)
                except Exception as exc:  # noqa: BLE001  (rows fail, the batch goes on; a rerun resumes)
                    return [Score.failed(f"judge batch mode: {type(exc).__name__}: {exc}") for _ in inputs]
            cached = CachedChat(chat, opts)
            try:
                scores = await score_rows(inputs, lambda item: self._score(cached, item),
                                          concurrency=opts.concurrency)
            finally:
                cached.close()
            if cached.hits:
                _LOG.info("judge: %s answers from the verdict cache, %s requests sent", f"{cached.hits:,}",
                          f"{cached.sent:,}")
            return scores

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

    async def _claims(self, client: CachedChat, item: ScoringInput) -> Score:
        """Claims mode (`_facts`): each claim with the evidence it needs, P(yes) from one token."""
        opts = self.options
        found = self._grounding.claim_passages(item, opts.passage_chars)
        if isinstance(found, Score):
            return found
        done = await verdicts(client, found, temperature=opts.temperature, max_tokens=opts.rating_tokens,
                              logprobs=opts.logprobs)
        score = verdict_score(done, {"model": opts.model, "mode": "claims", "response_status": item.status,
                                     "logprobs_available": client.logprobs_supported})
        if item.status not in ("", "completed") and score.error is None:
            return replace(score, explanation=f"answer not complete ({item.status}): {score.explanation}")
        return score

    async def _score(self, client: CachedChat, item: ScoringInput) -> Score:
        if self.options.mode == "claims":
            return await self._claims(client, item)
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


def _endpoint(options: Mapping[str, Any]) -> str:
    return str(options.get("base_url") or DEFAULT_BASE_URL)


SPEC = ScorerSpec("judge", spending=frozenset({"cache", "cache_dir", "price_in", "price_out", "max_cost"}),
                  cache="cache_dir", submit_ahead="batch", submit_only="batch_submit_only", endpoint=_endpoint)
"""What a run asks of the judge: a resumed run may change what it spends; its verdict cache sits
beside the page cache; in Batch API mode every row's requests are submitted before any is collected;
its endpoint (`base_url`) is checked before the first batch."""


def create(options: Mapping[str, Any]) -> JudgeScorer:
    """The registry's factory: a `JudgeScorer` from option keywords (`model` is required)."""
    return JudgeScorer(parse_options(JudgeOptions, options, "judge"))
