"""`tlmscore.watch`: the run of `score`, over a live store's new calls, batch after batch, for as long as asked.

Each poll lists the calls newer than the saved cursor (`_state`), decides which to score (`--where`,
then the trace's sample, then what the store already holds of this evaluator), runs the library's
pipeline over those records with the scorer (held to the spend windows, `_spend`), writes the
scores back onto the spans with the evaluator's identity (`tlmscore.annotate.deliver`), and only
then moves the cursor and saves it. A kill at any point loses no call: the next run lists the same
calls again, and passes over those the store shows annotated by this identity. A store that does
not answer is asked again after 1, 2, 4, … up to 60 seconds; the cursor stays where it was.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tlmscore.annotate import Policy, deliver
from tlmscore.errors import ConfigError, TranscriptError
from tlmscore.output import Row
from tlmscore.pipeline import aiter_chunks
from tlmscore.scoring.base import get_scorer, spec_of
from tlmscore.settings import Settings
from tlmscore.watch._choose import Condition, check_rate, kept, sample_key, sampled
from tlmscore.watch._feeds import Call, Feed, open_feed
from tlmscore.watch._identity import Evaluator, evaluator_of
from tlmscore.watch._spend import OVER_CAP, Capped, Spend, check_capped
from tlmscore.watch._state import State, load_state, parse_time, save_state
from tlmscore.watch._status import Counts

MAX_BACKOFF = 60.0
SWEEPS = 4
"""Sweeps of the `late` window per `late` seconds."""


class StoreDown(Exception):  # noqa: N818  (a state of the store, not a programming error)
    """The store did not answer (or did not take the annotations): the batch is tried again later."""


@dataclass(frozen=True)
class Plan:
    """What a watch does, checked: where it reads, with what it scores, which calls, how much it may spend."""

    source: str
    state: Path
    scorer: str = "grounding"
    options: Mapping[str, Any] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)
    sample: float = 1.0
    where: tuple[Condition, ...] = ()
    since: dt.datetime | None = None
    late: float = 60.0
    poll: float = 2.0
    batch: int = 200
    caps: Mapping[str, float | None] = field(default_factory=dict)
    rescore: bool = False
    threshold: float = 0.5


@dataclass
class Hooks:
    """What a watch tells its caller: the counts after each batch, and a line to say once (a cap, the store down)."""

    status: Callable[[Counts], None] = lambda _: None
    note: Callable[[str], None] = lambda _: None
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)


class Watcher:
    """One watch: its feed, state, evaluator and scorer, a batch at a time (`batch`)."""

    def __init__(self, plan: Plan, hooks: Hooks, env: Mapping[str, str]) -> None:
        check_rate(plan.sample)
        if plan.batch < 1:
            raise ConfigError(f"--batch {plan.batch}: must be at least 1")
        self.plan, self.hooks = plan, hooks
        options = spec_of(plan.scorer).with_cache(plan.options, plan.settings.cache_dir)
        self.evaluator: Evaluator = evaluator_of(plan.scorer, options, plan.settings, plan.threshold)
        self.state: State = load_state(plan.state)
        self._check_identity()
        self.counts = Counts.of(self.state.counts)
        self.spend = Spend(plan.caps, self.state.spend, now=hooks.now, said=hooks.note,
                           kept=lambda: save_state(plan.state, self.state))
        scorer = get_scorer(plan.scorer, options)
        check_capped(scorer, plan.caps)
        self.scorer = Capped(scorer, self.spend)
        self.feed: Feed = open_feed(plan.source, env)
        self._next_sweep = 0.0
        self.full = False
        """The last poll found a whole batch: more calls may be waiting."""

    def _check_identity(self) -> None:
        """A state saved under another evaluator identity is continued only with `rescore`, never silently."""
        saved, current = self.state.evaluator, self.evaluator.id
        if saved is not None and saved != current and not self.plan.rescore:
            raise ConfigError(f"{self.plan.state}: saved by evaluator {saved}, this watch is {current} (another "
                              "version or settings): give --rescore to score with it, or another --state")
        self.state.evaluator = current

    def _fresh(self) -> list[Call]:
        """Up to `batch` calls the cursor has not handled, oldest first.

        A poll lists the calls from the cursor on; a sweep (the first poll, then one every `late`
        / `SWEEPS` seconds) goes back `late` seconds before it, for calls that arrived after newer
        ones (a long call, a slow exporter), so most polls do not read the `late` window again.
        """
        sweep = time.monotonic() >= self._next_sweep
        at = self.state.since(self.plan.late if sweep else 0.0)
        fresh: list[Call] = []
        for call in self.feed.newer(self.plan.since if at is None else at):
            if call.key not in self.state.seen:
                fresh.append(call)
                if len(fresh) >= self.plan.batch:
                    break
        if sweep and len(fresh) < self.plan.batch:  # the whole window was read
            self._next_sweep = time.monotonic() + self.plan.late / SWEEPS
        return fresh

    def _chosen(self, calls: Sequence[Call]) -> list[Call]:
        """The calls to score: read, meeting `--where`, in the sample, not yet annotated by this identity."""
        candidates: list[Call] = []
        for call in calls:
            record = call.read.record
            if record is None:
                self.counts.skip("unreadable")
            elif not kept(self.plan.where, record, call.extra):
                self.counts.skip("where")
            elif not sampled(sample_key(record), self.plan.sample):
                self.counts.sampled_out += 1
            else:
                candidates.append(call)
        held = self.feed.annotated(candidates, self.evaluator.name)
        chosen: list[Call] = []
        for call in candidates:
            ids = held.get(call.key, set())
            if self.evaluator.id in ids:
                self.counts.skip("already scored")
            elif ids and not self.plan.rescore:
                self.counts.skip("another evaluator")
            else:
                chosen.append(call)
        return chosen

    async def _rows(self, calls: Sequence[Call]) -> list[Row]:
        """The library's pipeline over the calls' records, scored; each row named by the source it came from."""
        if not calls:
            return []
        records = [dict(c.read.record or {}) for c in calls]
        async with aclosing(aiter_chunks(records, self.plan.settings, scorer=self.scorer)) as chunks:
            rows = [row async for chunk in chunks for row in chunk]
        return [row.with_columns(source=self.feed.address, line=i) for i, row in enumerate(rows, start=1)]

    def _annotate(self, rows: Sequence[Row]) -> None:
        """The rows' scores onto their spans, with the evaluator's identity; `StoreDown` when the store gave up."""
        if not rows:
            return
        outcome = deliver(rows, self.feed.target, threshold=self.plan.threshold, policy=Policy(attempts=3),
                          evaluator=self.evaluator.fields())
        if outcome.gave_up is not None:
            raise StoreDown(f"annotations: {outcome.gave_up}")
        self.counts.annotated += outcome.written
        self.counts.skip("annotation failed", len(outcome.failed_rows) + outcome.skipped)
        for error in outcome.errors:
            self.hooks.note(f"annotations: {error}")

    async def batch(self) -> list[Row]:
        """One poll: the new calls listed, chosen, scored, annotated, and the cursor saved; the rows scored."""
        try:
            fresh = await asyncio.to_thread(self._fresh)
            chosen = await asyncio.to_thread(self._chosen, fresh)
        except TranscriptError as exc:
            raise StoreDown(str(exc)) from None
        rows = await self._rows(chosen)
        scored = [r for r in rows if not (isinstance(r.details, Mapping) and OVER_CAP in r.details)]
        await asyncio.to_thread(self._annotate, scored)
        self.full = len(fresh) >= self.plan.batch
        self.counts.seen += len(fresh)
        self.counts.scored += len(scored)
        self.counts.skip("over cost cap", len(rows) - len(scored))
        self.counts.cost_today = self.spend.spent("day")
        ended = [parse_time(c.ended) for c in fresh if c.ended]
        if ended:
            self.counts.lag = (self.hooks.now() - max(ended)).total_seconds()
        self.state.handled({c.key: c.started for c in fresh}, self.plan.late)
        self.state.counts = self.counts.to_json()
        save_state(self.plan.state, self.state)
        return scored


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    """Wait `seconds`, or until `stop` is set."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return


async def watch(source: str, *, state: str | Path, scorer: str = "grounding", options: Mapping[str, Any] | None = None,
                settings: Settings | None = None, sample: float = 1.0, where: Sequence[Condition] = (),
                since: dt.datetime | None = None, late: float = 60.0, poll: float = 2.0, batch: int = 200,
                max_cost_per_hour: float | None = None, max_cost_per_day: float | None = None,
                rescore: bool = False, threshold: float = 0.5, until_idle: bool = False,
                stop: asyncio.Event | None = None, hooks: Hooks | None = None,
                env: Mapping[str, str] | None = None) -> AsyncIterator[Row]:
    """The rows of a live store's new calls as they are scored and annotated, for as long as the caller iterates.

    `source` is `phoenix://HOST:PORT/PROJECT` or `mlflow://HOST:PORT/EXPERIMENT`; `state` the file of
    the cursor (made when missing).
    `sample` is the share of traces scored (by a hash of the trace id), `where` the `--where`
    conditions (`tlmscore.watch.parse_where`), `since` where a watch with no cursor starts (default:
    the store's first call). A call is scored once per evaluator identity (scorer, version, settings
    hash); `rescore` scores again calls another identity scored. `max_cost_per_hour` and
    `max_cost_per_day` hold the model requests to those dollars a window. `until_idle` ends the watch
    at the first poll with nothing new; `stop` (set by SIGTERM in the command) ends it after the
    batch in flight. `hooks` hears the counts after each batch and the lines said once.
    """
    plan = Plan(source, Path(state), scorer, dict(options or {}), settings or Settings(), sample, tuple(where), since,
                late, poll, batch, {"hour": max_cost_per_hour, "day": max_cost_per_day}, rescore, threshold)
    hooks = hooks or Hooks()
    watcher = Watcher(plan, hooks, os.environ if env is None else env)
    stop = stop or asyncio.Event()
    backoff = 1.0
    try:
        while not stop.is_set():
            try:
                rows = await watcher.batch()
            except StoreDown as exc:
                if watcher.counts.down is None:
                    hooks.note(f"the store does not answer ({exc}); asking again with backoff, the cursor kept")
                watcher.counts.down = str(exc)
                hooks.status(watcher.counts)
                await _pause(stop, backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
                continue
            if watcher.counts.down is not None:
                hooks.note("the store answers again")
                watcher.counts.down = None
            backoff = 1.0
            hooks.status(watcher.counts)
            for row in rows:
                yield row
            if not watcher.full:  # caught up: wait for the store, unless asked to end when idle
                if until_idle:
                    return
                await _pause(stop, poll)
    finally:
        watcher.feed.close()
