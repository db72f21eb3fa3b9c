"""`WriteBack`: scored rows written back to their targets as a run saves them, on a thread of its own.

Each target given gets every row (`origin`: each row goes back to where it came from, by
`destination`; a side file's rows, replayed, to the target each names), through one `Delivery` per
target for the whole run: no row is held beyond its target's batch, and the scores file is not
read back. The deadline counts the time spent writing back, not the time the run takes to make the
rows. Nothing is printed: `finish` returns what each target took (`Report`) and the side file's rows.

A run that can be resumed keeps a progress file (`progress_path`, beside its checkpoint): after
each batch, how many of each target's rows (in the scores file's order) are done with, and the
rows that failed. A resumed run, handed the earlier run's rows again, writes back only the rows
after that point, so a kill loses no failed row and doubles at most the batch in flight.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tlmscore.annotate._route import ORIGIN, destination
from tlmscore.annotate._send import Clock, Delivery, Outcome, Policy, read_side_file, write_side_file
from tlmscore.annotate._values import side_row
from tlmscore.errors import ConfigError
from tlmscore.stores import Target, keyed, parse_target, source_server

CHUNK = 1000
"""Rows written back at a time (of a file streamed to `add`)."""
_WAITING = 4
"""Chunks handed over and not yet written back, at most: when the store is slower than the run, the run waits."""

Route = tuple[int, str | None, bool]  # the place of the target given, its text (None: no trace), whether the origin


def named_servers(targets: Sequence[str], inputs: Sequence[Path | str], env: Mapping[str, str]) -> dict[str, list[str]]:
    """The servers the command line names, by store: its live inputs and its explicit targets."""
    named: dict[str, list[str]] = {}
    for item in inputs:
        found = source_server(item) if isinstance(item, str) else None
        if found is not None:
            named.setdefault(found[0], []).append(found[1])
    for text in targets:
        if text != ORIGIN:
            target = parse_target(text, env)
            if not target.file:
                named.setdefault(target.store, []).append(target.location)
    return named


def bound(text: str, env: Mapping[str, str], named: Mapping[str, list[str]]) -> Target:
    """The target `text` names, its keys bound to their server (`named`: the servers the command line names)."""
    target = parse_target(text, env)
    return keyed(target, env, named.get(target.store, []))


def progress_path(output: Path) -> Path:
    """Where a run's write-back keeps how far it has got: beside the run's checkpoint, removed at the end."""
    return output.with_name(output.name + ".annotate-progress")


@dataclass
class Report:
    """What one target took: its rows, and how they went (`outcome`), or why the target could not be used."""

    text: str | None
    """The target (None: the rows that have no trace to go back to)."""
    origin: bool
    """Whether it is where the rows came from (a bare `--annotate`)."""
    rows: int
    target: Target | None = None
    outcome: Outcome | None = None
    refused: str | None = None


@dataclass
class Finished:
    """What a write-back did: each target's `Report`, in the order given, and the rows left in the side file."""

    reports: list[Report]
    left: list[Any]
    side: Path


@dataclass
class _Feed:
    """One target's rows: sent through its `delivery`, or kept because the target cannot be used (`refused`)."""

    key: str
    """The target given and this one, as the progress file names them."""
    text: str | None
    shown: str
    """The target's name in the side file."""
    delivery: Delivery | None = None
    refused: str | None = None
    rows: int = 0
    kept: list[dict[str, Any]] = field(default_factory=list)
    skip: int = 0
    """Rows an earlier run has done with, still to come again (a resumed run's earlier rows)."""
    before: int = 0
    """Rows an earlier run had done with, skipped."""
    recorded: tuple[int, int] = (0, 0)
    """The rows done and failed, as the progress file has them."""

    def done(self) -> int:
        return self.before + (self.delivery.handled if self.delivery is not None else self.rows)

    def failed(self) -> list[dict[str, Any]]:
        return self.delivery.outcome.failed_rows if self.delivery is not None else self.kept


class _Progress:
    """The progress file: a JSON line per step (a route, its rows done, the rows failed since the last), synced."""

    def __init__(self, path: Path | None, *, resume: bool) -> None:
        self.path, self.done, self.failed = path, dict[str, int](), list[dict[str, Any]]()
        self._handle: IO[str] | None = None
        if path is not None and not resume:
            path.unlink(missing_ok=True)
        for line in path.read_text(encoding="utf-8").split("\n") if path is not None and path.exists() else []:
            with contextlib.suppress(ValueError):  # an empty line, or the one a kill cut off
                step = json.loads(line)
                self.done[step["route"]] = step["done"]
                self.failed += step["failed"]

    def record(self, route: str, done: int, failed: list[dict[str, Any]]) -> None:
        if self.path is None:
            return
        self._handle = self._handle or self.path.open("a", encoding="utf-8")
        # each step starts a line of its own: a line a kill cut off is never joined to the next
        self._handle.write("\n" + json.dumps({"route": route, "done": done, "failed": failed}, ensure_ascii=False))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)


class WriteBack:
    """Scored rows written back as they come, a chunk at a time (`add`); `finish` says what each target took.

    `side` is the side file (its rows, of an earlier run, are replaced by those tried again);
    `progress` the progress file of a run that may be resumed (`resume`: this run continues the one
    that left it). `replay`: the rows are a side file's, each sent to the target it names.
    """

    def __init__(self, targets: Sequence[str], side: Path, *, threshold: float, inputs: Sequence[Path | str] = (),
                 timeout: float = 20.0, deadline: float | None = None, replay: bool = False,
                 earlier: list[Any] | None = None, progress: Path | None = None, resume: bool = False) -> None:
        if not targets and not replay:
            raise ConfigError("--to TARGET is needed: the rows of a scored output name no target (a side file's do)")
        env = self._env = os.environ
        self._named = named_servers(targets, inputs, env)
        for given in targets:  # each target given is usable, and its keys know their server, before anything is sent
            if given != ORIGIN:
                bound(given, env, self._named)
        self._side, self._threshold, self._replay, self._spent = side, threshold, replay, 0.0
        self._since: float | None = None
        self._earlier = (read_side_file(side) or []) if earlier is None else earlier
        self._keys = {(str(r.get("id")), str(r.get("target"))) for r in self._earlier}
        self._retried: set[tuple[str, str]] = set()  # rows of the earlier side file tried again
        self._clock, self._policy = Clock(deadline, now=self._now), Policy(timeout=timeout)
        self._progress = _Progress(progress, resume=resume)
        self._targets = [] if replay else list(dict.fromkeys(targets))  # a target given twice is written to once
        self._feeds: dict[Route, _Feed] = {}
        self._waiting: queue.Queue[list[Any] | None] = queue.Queue(_WAITING)
        self._error: Exception | None = None
        self._thread: threading.Thread | None = None
        for at, text in enumerate(self._targets):  # reported even when no row comes
            if text != ORIGIN:
                self._feed((at, text, False))

    def _now(self) -> float:
        return self._spent + (time.monotonic() - self._since if self._since is not None else 0.0)

    def _feed(self, route: Route) -> _Feed:
        if route not in self._feeds:
            at, text, _ = route
            key = json.dumps([self._targets[at] if self._targets else None, text])
            feed = self._feeds[route] = _Feed(key, text, str(text), skip=self._progress.done.get(key, 0))
            if text is not None:
                try:
                    target = bound(text, self._env, self._named)
                except ConfigError as exc:
                    feed.refused = str(exc)
                else:
                    feed.shown, feed.delivery = target.text, Delivery(
                        target, threshold=self._threshold, policy=self._policy, clock=self._clock,
                        on_batch=lambda: self._record(feed))
        return self._feeds[route]

    def add(self, rows: Iterable[Any]) -> None:
        """Hand over rows to write back, in the order of the scores file: a run's chunk, or a file's as a stream.

        They are sent on a thread of their own, so a slow store does not hold up the run (its event
        loop, whose page fetches have deadlines); at most `_WAITING` chunks wait for it.
        """
        stream = iter(rows)
        while chunk := list(itertools.islice(stream, CHUNK)):
            if self._thread is None:
                self._thread = threading.Thread(target=self._write, name="tlmscore-write-back", daemon=True)
                self._thread.start()
            self._waiting.put(chunk)

    def _write(self) -> None:
        """The write-back thread: chunk after chunk until `finish`; an error is raised again by `finish`."""
        while (chunk := self._waiting.get()) is not None:
            if self._error is None:
                try:
                    self._send(chunk)
                except Exception as exc:  # noqa: BLE001  (kept for the caller's thread)
                    self._error = exc

    def _send(self, chunk: list[Any]) -> None:
        groups: dict[Route, list[Any]] = {}
        for row in chunk:
            for route in [(0, row["target"], False)] if self._replay else [
                    (at, destination(row), True) if text == ORIGIN else (at, text, False)
                    for at, text in enumerate(self._targets)]:
                groups.setdefault(route, []).append(row)
        self._since = time.monotonic()
        for route, group in groups.items():
            feed = self._feed(route)
            if feed.text is not None:
                self._retried.update(k for r in group if (k := (str(r.get("id")), feed.shown)) in self._keys)
            skipped = min(feed.skip, len(group))  # done with by the run this one resumes
            feed.skip, feed.before, new = feed.skip - skipped, feed.before + skipped, group[skipped:]
            feed.rows += len(new)
            if feed.refused is not None:
                feed.kept += [side_row(r, feed.shown) for r in new]
            elif feed.delivery is not None:
                feed.delivery.add(new)
            self._record(feed)
        self._spent, self._since = self._now(), None

    def _record(self, feed: _Feed) -> None:
        """Keep how far `feed` has got in the progress file, with the rows that failed since last time."""
        failed = feed.failed()
        if (feed.done(), len(failed)) != feed.recorded:
            self._progress.record(feed.key, feed.done(), failed[feed.recorded[1]:])
            feed.recorded = (feed.done(), len(failed))

    def finish(self) -> Finished:
        """Send what waits, write the side file (an earlier run's failures first); what each target took."""
        if self._thread is not None:
            self._waiting.put(None)
            self._thread.join()
        if self._error is not None:
            raise self._error
        reports, failures = [], list(self._progress.failed)
        for route in sorted(self._feeds, key=lambda r: r[0]):  # the origins in the order their rows came
            feed = self._feeds[route]
            report = Report(feed.text, route[2], feed.rows, refused=feed.refused)
            if feed.delivery is not None:
                self._since = time.monotonic()
                report.target, report.outcome = feed.delivery.target, feed.delivery.close()
                self._spent, self._since = self._now(), None
            failures += feed.failed()
            reports.append(report)
        left = [r for r in self._earlier if (str(r.get("id")), str(r.get("target"))) not in self._retried] + failures
        write_side_file(self._side, left)
        self._progress.close()
        return Finished(reports, left, self._side)
