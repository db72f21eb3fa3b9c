"""The judge in Batch API mode: the same requests and scores as live, sent as batches at half the price.

Requests are keyed by a `custom_id` made from a hash of their body (and the sample's number, so the
`k` identical sampling requests of a row stay apart): a rerun, or another row with the same prompt
and answer, finds the same ids, which is what lets `BatchRunner` resume by `custom_id`. Rows are
judged in rounds: the ratings (and, with `samples`, the sampled answers) in one batch; with
`samples`, the agreement ratings of those answers in a second. With `batch_submit_only`, the first
round is only submitted, so that a caller can submit every chunk of a large run before waiting for
any (the command line does this), and collect them all in a second pass. Requests rejected for a parameter
the judge can do without or rename (`chat.rejected_parameter`) are sent again so, in one more batch;
the state folder notes what was rejected, so later chunks and reruns build their requests so from
the start and find the same `custom_id`s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from tlmscore._chat import ChatClient, Completion, completion_from_body, rejected_parameter
from tlmscore.errors import ScorerError
from tlmscore.scoring.base import Score
from tlmscore.scoring.judge._batch_api import BatchFailure, BatchRunner
from tlmscore.scoring.judge._options import Judged, JudgeOptions
from tlmscore.scoring.judge._prompts import (
    AGREEMENT_PROMPT,
    AGREEMENT_WORDS,
    REFLECTION_PROMPTS,
    REFLECTION_WORDS,
    Rating,
    messages_of,
    rate,
)

if TYPE_CHECKING:
    import openai

    from tlmscore.model import ScoringInput


Outcome = Completion | str
_ID_PREFIX = "tlms-"
_ADAPTATIONS = 3  # logprobs, max_tokens, temperature: each learnt once
_REJECTED = "rejected_parameters"


class Judge(Protocol):
    """What batch mode asks of the judge scorer: its options, an input's fields, and a row's score from ratings."""

    @property
    def options(self) -> JudgeOptions:
        """The judge's options."""
        ...

    def judged(self, item: ScoringInput) -> Judged:
        """The fields the prompts are filled with."""
        ...

    def combine(self, judged: Judged, reflections: list[Rating], agreements: list[Rating], *,
                logprobs: bool) -> Score:
        """The row's score from its ratings."""
        ...


def custom_id(body: Mapping[str, Any], number: int = 0) -> str:
    """The request's `custom_id`: a hash of its body (canonical JSON) and its number among equal bodies."""
    digest = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS) + f"#{number}".encode())
    return _ID_PREFIX + digest.hexdigest()[:40]


class _Round(dict[str, dict[str, Any]]):
    """Request bodies of one round by `custom_id`, so equal requests are sent once."""

    def add(self, body: dict[str, Any], number: int = 0) -> str:
        key = custom_id(body, number)
        self[key] = body
        return key


def _outcome(value: dict[str, Any] | BatchFailure) -> Outcome:
    if isinstance(value, BatchFailure):
        return f"judge batch request failed: {value.message}"
    try:
        return completion_from_body(value)
    except ScorerError as exc:
        return str(exc)


async def _run(runner: BatchRunner, chat: ChatClient, requests: dict[str, dict[str, Any]]) -> dict[str, Outcome]:
    """Outcomes by `custom_id`; requests rejected for a parameter the judge can do without are sent again so."""
    raw = await runner.run(requests)
    outcomes = {key: _outcome(value) for key, value in raw.items()}
    pending = {key: requests[key] for key in requests}
    for _ in range(_ADAPTATIONS):
        rejected = {key: parameter for key, value in raw.items() if isinstance(value, BatchFailure)
                    and (parameter := rejected_parameter(value.status or 0, value.message, pending[key]))}
        if not rejected:
            break
        chat.rejected.update(rejected.values())
        learnt = sorted({*runner.notes().get(_REJECTED, ()), *rejected.values()})
        runner.note(_REJECTED, learnt)  # a rerun builds its requests so from the start, as this run does now
        retry = _Round()
        again = {key: retry.add(chat.adjusted(pending[key])) for key in rejected}
        second = await runner.run(retry)
        pending = {key: retry[new] for key, new in again.items()}
        raw = {key: second[new] for key, new in again.items()}
        outcomes |= {key: _outcome(value) for key, value in raw.items()}
        # kept under the first form's id too, so a rerun finds them without walking the rejections again
        runner.remember((key, value) for key, value in raw.items() if not isinstance(value, BatchFailure))
    return outcomes


def _ratings(keys: Sequence[str], outcomes: Mapping[str, Outcome],
             words: Sequence[tuple[str, str]]) -> list[Rating] | str:
    """Ratings of the completions under `keys`, or the first failure's message."""
    found = [outcomes[k] for k in keys]
    failed = next((o for o in found if isinstance(o, str)), None)
    return failed if failed is not None else [rate(o, words) for o in found if isinstance(o, Completion)]


async def score_batch(scorer: Judge, chat: ChatClient, client: openai.AsyncOpenAI,
                      inputs: Sequence[ScoringInput]) -> list[Score]:
    """One score per input, from requests sent through the Batch API (state in `options.batch_dir`)."""
    opts = scorer.options
    runner = BatchRunner(client, Path(opts.batch_dir or "."), opts)
    chat.rejected.update(runner.notes().get(_REJECTED, ()))
    judged = [scorer.judged(item) for item in inputs]
    first = _Round()
    reflections = [[first.add(chat.body(_messages(REFLECTION_PROMPTS[i], j), temperature=opts.temperature,
                                        max_tokens=opts.max_tokens, logprobs=opts.logprobs))
                    for i in range(opts.reflections)] for j in judged]
    samples = [[first.add(chat.body([{"role": "user", "content": j.fields["prompt"]}],
                                    temperature=opts.sample_temperature, max_tokens=opts.sample_max_tokens), n)
                for n in range(opts.samples)] for j in judged]
    if opts.batch_submit_only:
        await runner.run(first, wait=False)
        return [Score.unscorable("submitted to the Batch API; run again to collect the results") for _ in inputs]
    outcomes = await _run(runner, chat, first)
    agreements: list[list[str] | str] = [[] for _ in judged]
    if opts.samples:
        agreements = await _agreements(runner, chat, opts, (judged, samples), outcomes)
    scores = []
    for j, mine, theirs in zip(judged, reflections, agreements, strict=True):
        rated = _ratings(mine, outcomes, REFLECTION_WORDS)
        agreed = theirs if isinstance(theirs, str) else _ratings(theirs, outcomes, AGREEMENT_WORDS)
        if isinstance(rated, str):
            scores.append(Score.failed(rated))
        elif isinstance(agreed, str):
            scores.append(Score.failed(agreed))
        else:
            scores.append(scorer.combine(j, rated, agreed, logprobs=chat.logprobs_supported))
    return scores


async def _agreements(runner: BatchRunner, chat: ChatClient, opts: JudgeOptions,
                      rows: tuple[Sequence[Judged], Sequence[Sequence[str]]],
                      outcomes: dict[str, Outcome]) -> list[list[str] | str]:
    """The second round: each sampled answer compared with the proposed one; keys per row, or a failure.

    `rows` holds the rows and the keys of their sampled answers; their outcomes are added to `outcomes`.
    """
    judged, samples = rows
    second = _Round()
    keys: list[list[str] | str] = []
    for j, mine in zip(judged, samples, strict=True):
        answers = [outcomes[k] for k in mine]
        failed = next((a for a in answers if isinstance(a, str)), None)
        if failed is not None:
            keys.append(failed)
            continue
        keys.append([second.add(chat.body(_messages(AGREEMENT_PROMPT, j, other=a.text), temperature=opts.temperature,
                                          max_tokens=opts.max_tokens, logprobs=opts.logprobs), n)
                     for n, a in enumerate(answers) if isinstance(a, Completion)])
    outcomes |= await _run(runner, chat, second)
    return keys


def _messages(prompt: tuple[str, str], judged: Judged, **more: str) -> list[dict[str, str]]:
    return messages_of(prompt, {**judged.fields, **more})
