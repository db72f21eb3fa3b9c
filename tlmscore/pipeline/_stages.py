"""The pipeline over many transcripts: chunk → convert → plan → fetch → render → rows.

Each chunk is handled on its own (no state outside the arguments), so a distributed engine can
map the same functions over partitions; rows are handed to a sink as each chunk completes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import math
from collections import deque
from collections.abc import (
    AsyncGenerator,
    Callable,
    Container,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from tlmscore._urls import url_key
from tlmscore.convert import NO_REQUEST, cited_files, convert_transcript
from tlmscore.convert.context import ItemConverter
from tlmscore.convert.registry import ConverterLike
from tlmscore.convert.registry import converters as registered_converters
from tlmscore.errors import TlmscoreError
from tlmscore.evidence.page import Page, PagesByKey, PageSource, answered_at, page_for, planned_pages
from tlmscore.evidence.plan import Plan
from tlmscore.ingest import (
    BatchInputs,
    ChainIndex,
    Find,
    Input,
    Inputs,
    Location,
    decided,
    read_located,
    with_history,
)
from tlmscore.model import Conversation, Message, ScoringInput, ToolCall, Transcript
from tlmscore.output import Row
from tlmscore.pipeline._hydrate import hydrated, open_client
from tlmscore.pipeline._meter import InputMeter
from tlmscore.pipeline._scoring import Scoring
from tlmscore.rendering import render
from tlmscore.scoring.base import Score, Scorer
from tlmscore.settings import Settings
from tlmscore.stores import find_reader, is_live

Progress = Callable[[str, int, int | None], None]
T = TypeVar("T")


@dataclass(frozen=True)
class _Converted:
    transcript: Transcript
    conversation: Conversation | None
    error: str | None
    history_complete: bool | None = None


def _failure(transcript: Transcript, exc: Exception) -> str:
    """A record's error: where it is, and what went wrong (a tlmscore error says it in its own words)."""
    said = str(exc) if isinstance(exc, TlmscoreError) else f"{type(exc).__name__}: {exc}"
    return f"{transcript.source}:{transcript.line}: {said}"


def _convert(transcript: Transcript, settings: Settings, chains: ChainIndex | None = None,
             converters: Mapping[str, ItemConverter] | None = None) -> _Converted:
    """One record, its history joined first (ingest), then its items converted; its status is ingest's, read."""
    joined, history, failed = transcript, None, None
    if chains is not None and transcript.error is None:  # the calls it continues in front of its input
        try:
            history = chains.history(transcript)
            joined = with_history(transcript, history)
        except Exception as exc:  # noqa: BLE001  (one bad record must not stop the batch)
            failed = _failure(transcript, exc)
    status = transcript.status
    error = transcript.error or (status.error if status is not None else None) or failed
    if error is not None:  # unreadable, no answer (a failed or unfinished response), or its history failed
        return _Converted(transcript, None, error)
    extra = (*transcript.warnings, *((status.warning,) if status is not None and status.warning else ()))
    try:
        conv = convert_transcript(joined, settings, converters=converters)
    except Exception as exc:  # noqa: BLE001  (one bad record must not stop the batch)
        return _Converted(transcript, None, _failure(transcript, exc))
    if history is None:
        return _Converted(transcript, replace(conv, warnings=(*conv.warnings, *extra)), None, bool(transcript.request))
    own = (NO_REQUEST,) if not transcript.request and NO_REQUEST not in conv.warnings else ()
    conv = replace(conv, warnings=(*history.warnings, *conv.warnings, *own, *extra))
    return _Converted(transcript, conv, None, history.complete and bool(transcript.request))


def _count_calls(conv: Conversation) -> int:
    turns = (*conv.turns, *conv.answer)
    return sum(1 for t in turns if isinstance(t, ToolCall)) + sum(
        len(t.calls) for t in turns if isinstance(t, Message))


def _read_by_a_model(urls: Iterable[str], pages: PagesByKey) -> int:
    """How many of `urls` have text a model read and summarised (`--page-source chat`): the row's `n_urls_model`."""
    return sum(1 for url in urls if (page := page_for(pages, url)).ok and page.source == "model")


def _draft(item: _Converted, error: str | None) -> Row:
    """The row of a record that has no prompt: where it was read, its status, and why (`error`)."""
    t = item.transcript
    return Row(id=t.id, source=t.source, line=t.line, model=t.model,
               response_id=t.response.get("id") if t.response else None, error=error,
               response_status=t.status.value if t.status else None,
               origin=t.origin, trace_id=t.trace_id, span_id=t.span_id)


def _row(item: _Converted, pages: PagesByKey, settings: Settings) -> tuple[Row, ScoringInput | None]:
    """The row of one record, and what a scorer needs of it (None for an error row)."""
    conv = item.conversation
    if conv is None:
        return _draft(item, item.error), None
    status = item.transcript.status
    try:
        scoring = render(conv, pages, settings)
        scoring = replace(scoring, status=status.value) if status is not None else scoring
    except Exception as exc:  # noqa: BLE001  (a render failure is this record's error row)
        where = f"{item.transcript.source}:{item.transcript.line}"
        return _draft(item, f"{where}: render failed: {type(exc).__name__}: {exc}"), None
    keys = {url_key(u): u for u in conv.urls}
    ok = sum(1 for u in keys.values() if page_for(pages, u).ok)
    row = replace(_draft(item, None), prompt=scoring.prompt, response=scoring.response,
                  n_tool_calls=_count_calls(conv), n_urls=len(keys), n_urls_ok=ok, n_urls_failed=len(keys) - ok,
                  warnings=conv.warnings, history_complete=item.history_complete, cited_files=tuple(cited_files(conv)),
                  n_urls_model=_read_by_a_model(keys.values(), pages))
    return row, scoring


def _scored(row: Row, scorer: Scorer, score: Score | None) -> Row:
    """`row` with the score columns of `scorer` (None: the row was not given to it, an error row)."""
    added = dict.fromkeys(getattr(scorer, "columns", ()), math.nan)  # a wrapper's columns, on every row
    if score is None:
        return row.with_columns(scorer=scorer.name, score=math.nan, explanation="", details={}, **added)
    error = row.error
    if score.error and not error:
        error = f"{row.source}:{row.line}: scoring failed: {score.error}"
    return row.with_columns(scorer=scorer.name, score=score.score, explanation=score.explanation,
                            details=score.details, error=error, **(added | score.columns))


async def _score(rows: Sequence[Row], inputs: Sequence[ScoringInput | None],
                 scorer: Scorer | Scoring | None) -> list[Row]:
    """`rows` with the score columns (as they are, with no scorer); a scorer failure becomes that row's error."""
    if scorer is None:
        return list(rows)
    todo = [(i, x) for i, x in enumerate(inputs) if x is not None]
    scores = await scorer.score_many([x for _, x in todo])
    if isinstance(scorer, Scoring):
        scorer = scorer.scorer
    by_row = {i: s for (i, _), s in zip(todo, scores, strict=True)}
    return [_scored(row, scorer, by_row.get(i)) for i, row in enumerate(rows)]


def _plan(converted: Sequence[_Converted]) -> Plan:
    """The chunk's pages, each as of the earliest answer citing it (by `url_key`)."""
    times: dict[str, float] = {}
    for item in converted:
        when = answered_at(item.transcript.response)
        if item.conversation is None or when is None:
            continue
        for url in item.conversation.urls:
            key = url_key(url)
            times[key] = min(times.get(key, when), when)
    return Plan.of((c.conversation.urls for c in converted if c.conversation is not None), times)


async def _rendered(transcripts: Sequence[Transcript], settings: Settings, source: PageSource,
                    chains: ChainIndex | None = None, *, converters: Mapping[str, ItemConverter] | None = None,
                    ) -> tuple[list[Row], list[ScoringInput | None]]:
    """A chunk's rows before scoring, and what a scorer needs of each (None for an error row).

    A record is rendered as soon as its own pages are ready (from a source that streams them),
    while the pages of later records are still on their way.
    """
    converted = [_convert(t, settings, chains, converters) for t in transcripts]
    rendered: list[tuple[Row, ScoringInput | None] | None] = [None] * len(converted)
    pages: dict[str, Page] = {}
    waiting: dict[str, list[int]] = {}
    missing = [0] * len(converted)
    for i, item in enumerate(converted):
        keys = {url_key(u) for u in item.conversation.urls if u and u.strip()} if item.conversation else set()
        for key in keys:
            waiting.setdefault(key, []).append(i)
        missing[i] = len(keys)
        if not keys:
            rendered[i] = _row(item, pages, settings)
    plan = _plan(converted)
    if plan:
        async with aclosing(planned_pages(source, plan)) as arriving:
            async for key, page in arriving:
                pages[key] = page
                for i in waiting.pop(key, ()):
                    missing[i] -= 1
                    if not missing[i]:
                        rendered[i] = _row(converted[i], pages, settings)
    done = [r if r is not None else _row(c, pages, settings) for r, c in zip(rendered, converted, strict=True)]
    return [row for row, _ in done], [x for _, x in done]


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


async def aiter_chunks(source: Inputs, settings: Settings, *, pages: PageSource | None = None,
                       progress: Progress | None = None, scorer: Scorer | None = None,
                       skip: Container[tuple[str, int]] = (),
                       converters: Mapping[str, ConverterLike] | None = None,
                       ) -> AsyncGenerator[list[Row], None]:
    """Rows of every record of `source`, one list per chunk of `settings.chunk_size` records.

    Records whose `(source, line)` is in `skip` (done by an earlier, interrupted run) are passed over.
    `converters` adds or replaces item converters (see `tlmscore.convert.registry.converters`).
    Files are read on a worker thread, a chunk at a time, so the event loop stays free meanwhile.
    """
    done = 0
    table = registered_converters(converters)
    async with AsyncExitStack() as stack:
        from tlmscore.evidence.layers import open_page_source  # noqa: PLC0415  (network stack on demand)

        # Page files first, then the caller's source or else the cache and the web (see evidence.layers).
        page_source = await stack.enter_async_context(open_page_source(settings, progress, given=pages))
        batch = await asyncio.to_thread(BatchInputs, settings.batch_inputs) if settings.batch_inputs else None
        joined = batch if batch is not None else ()
        if batch is not None:
            stack.callback(batch.close)
        # each input decided once (its reader, or its kind), for the chain index's passes and the read
        find = partial(find_reader, fmt=settings.input_format)
        inputs = await asyncio.to_thread(decided, source, find)
        chains = await asyncio.to_thread(_chain_index, inputs, joined, find)
        if chains is not None:
            stack.callback(chains.close)
        client = await stack.enter_async_context(open_client()) if settings.hydrate else None
        records = ((where, t) for where, t in read_located(inputs, batch_inputs=joined, find=find)
                   if (t.source, t.line) not in skip)
        chunks = _chunks(records, settings.chunk_size)
        scoring = Scoring(scorer, settings.score_workers) if scorer is not None else None
        if scoring is not None:
            stack.callback(scoring.close)
        ahead = scoring.ahead if scoring is not None else 0
        meter = _start_progress(source, progress)
        # Chunks being scored while the next is prepared (worker processes score; this process converts),
        # each with where its last record was read (the progress of the input's bytes).
        scored: deque[tuple[asyncio.Future[list[Row]], Location]] = deque()
        stack.callback(_cancel_all, scored)

        async def finished() -> list[Row]:
            nonlocal done
            future, last = scored.popleft()
            rows = await future
            done += len(rows)
            if progress is not None and meter is not None:
                _report(progress, meter, done, last)
            return rows

        empty: list[tuple[Location, Transcript]] = []
        while located := await asyncio.to_thread(next, chunks, empty):
            chunk = [t for _, t in located]
            if client is not None:
                chunk = await hydrated(chunk, client, settings.concurrency)
            rows, inputs = await _rendered(chunk, settings, page_source, chains, converters=table)
            scored.append((asyncio.ensure_future(_score(rows, inputs, scoring)), located[-1][0]))
            while len(scored) > ahead:
                yield await finished()
        while scored:
            yield await finished()
        if progress is not None and meter is not None and meter.total is not None:
            progress("input", meter.total, meter.total)


def _start_progress(source: Inputs, progress: Progress | None) -> InputMeter | None:
    """The meter of the input files, their total reported at 0 before the first chunk (None: no progress)."""
    if progress is None:
        return None
    meter = InputMeter(list(source) if isinstance(source, (list, tuple)) else [source])
    if meter.total is not None:
        progress("input", 0, meter.total)
    progress("records", 0, None)
    return meter


def _report(progress: Progress, meter: InputMeter, done: int, last: Location) -> None:
    """Records done, and bytes of the inputs up to the last of them."""
    position = meter.position(last)
    if position is not None:
        progress("input", position, meter.total)
    progress("records", done, None)


def _cancel_all(pending: Iterable[tuple[asyncio.Future[list[Row]], Location]]) -> None:
    """Cancel the chunks still being scored when the run stops early (an error, Ctrl-C, a consumer that left)."""
    for future, _ in pending:
        future.cancel()


def _chain_index(source: Inputs, batch: BatchInputs | tuple[()], find: Find) -> ChainIndex | None:
    """The chain index of a source that can be read twice (paths, records, lists); else None.

    A live source (a trace store's address) is not read again for it: its follow-up calls are
    scored with the history the store holds in each span.
    """
    items = source if isinstance(source, (list, tuple)) else [source]
    given = [item.given if isinstance(item, Input) else item for item in items]
    if any(isinstance(item, str) and is_live(item) for item in given):
        return None
    if isinstance(source, (str, Path, Input, dict, list, tuple)) or hasattr(source, "model_dump"):
        return ChainIndex.build(source, batch_inputs=batch, find=find)
    return None


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from sync code, also inside Jupyter's running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


# The steps of a chunk (`aiter_chunks`) one record at a time, for an engine that spreads a batch's records,
# pages and scoring over machines (`tlmscore.ray`): the same functions, so the same rows.
convert_record = _convert
record_row = _row
score_rows = _score
