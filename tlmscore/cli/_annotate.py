"""`tlmscore annotate SCORED [--to TARGET]` and `score --annotate [TARGET]`: scores written back onto traces.

A bare `--annotate` (or the target `origin`) sends each row back to where it came from, by its
`origin` (see `tlmscore.annotate.destination`); rows with no trace are counted, not failed.

Rows are written back chunk by chunk as a run saves them (`WriteBack`), each chunk in the scores
file (its checkpoint) first, never read back; annotations that fail are listed on stderr and kept in a
side file (`SCORED.annotate-failed.jsonl`, or `--failed FILE`) whose rows name the target they
failed at: `tlmscore annotate SIDE` replays each row to its target (`--to` picks some of them),
rewriting the side file with what still fails and removing it when nothing does.

Keys go only to the server they are for: the one their store's variable names, else the one
server of the store the command line names (an input or a target), never an address read from
a scored file or a side file (see `tlmscore.stores.credentials`).
"""

from __future__ import annotations

import argparse
import itertools
import os
import queue
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tlmscore.annotate import (
    ORIGIN,
    Clock,
    Delivery,
    Policy,
    destination,
    input_destination,
    needed,
    read_side_file,
    side_row,
    write_side_file,
)
from tlmscore.errors import ConfigError
from tlmscore.output import read_rows
from tlmscore.stores import (
    Target,
    check_source,
    connectors,
    find_reader,
    is_live,
    keyed,
    parse_target,
    source_server,
    target_forms,
)

SIDE_SUFFIX = ".annotate-failed.jsonl"
NO_TRACE = "not annotated: no trace to go back to"
DEFAULT_TIMEOUT = 20.0
DEFAULT_DEADLINE = 3600.0
_CHUNK = 1000
"""Rows of a scored file written back at a time."""
_WAITING = 4
"""Chunks handed over and not yet written back, at most: when the store is slower than the run, the run waits."""


def add_annotate_flags(parser: argparse.ArgumentParser) -> None:
    """`score`'s `--annotate` flags, in a group of their own."""
    group = parser.add_argument_group("annotations (scores written back onto traces)")
    group.add_argument("--annotate", action="append", default=[], metavar="TARGET", nargs="?", const=ORIGIN,
                       help="annotate OUT's rows as they are saved: alone, back to where each row came from "
                            f"(its origin); or {target_forms()} (repeatable)")
    group.add_argument("--annotate-threshold", type=float, default=0.5, metavar="T",
                       help="annotation label: supported at or above T, unsupported below (default 0.5)")
    group.add_argument("--annotate-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                       help=f"how long one write-back request may take (default {DEFAULT_TIMEOUT:g})")
    group.add_argument("--annotate-deadline", type=float, default=DEFAULT_DEADLINE, metavar="SECONDS",
                       help="time writing back may take before the rest is kept in the side file "
                            f"(default {DEFAULT_DEADLINE:g})")


def add_annotate_parser(sub: Any) -> None:
    """The `annotate` subcommand's flags."""
    annotate = sub.add_parser("annotate", help="write the scores of a scored output back as trace annotations")
    annotate.add_argument("scored", type=Path, metavar="SCORED",
                          help="a `tlmscore score` output, or a side file of annotations that failed")
    annotate.add_argument("--to", action="append", default=[], metavar="TARGET",
                          help=f"{ORIGIN} (where each row came from), {target_forms()} (repeatable); "
                               "a side file's rows go back to the target each names, unless --to picks some")
    annotate.add_argument("--threshold", type=float, default=0.5,
                          help="label: supported at or above it, unsupported below (default 0.5)")
    annotate.add_argument("--failed", type=Path, metavar="FILE",
                          help=f"side file for annotations that failed (default SCORED{SIDE_SUFFIX})")
    annotate.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                          help=f"how long one request may take (default {DEFAULT_TIMEOUT:g})")
    annotate.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE, metavar="SECONDS",
                          help=f"when to stop and keep the rest in the side file (default {DEFAULT_DEADLINE:g})")


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


def _keyed(target: Target, env: Mapping[str, str], named: Mapping[str, list[str]]) -> Target:
    return keyed(target, env, named.get(target.store, []))


def check_targets(targets: list[str], inputs: Sequence[Path | str] | None = None, fmt: str | None = None) -> None:
    """Refuse a target that cannot be used, before any work is done.

    For `origin`, the targets the inputs' rows will go back to (known from the reader of each input)
    must be configured; a key that would go to two servers must say which one it is for.
    """
    env = os.environ
    named = named_servers(targets, inputs or [], env)
    for text in targets:
        if text != ORIGIN:
            _keyed(parse_target(text, env), env, named)
            continue
        for back in needed(_input_destination(item, fmt) for item in inputs or []):
            try:
                _keyed(parse_target(back, env), env, named)
            except ConfigError as exc:
                raise ConfigError(f"--annotate (back to each row's origin): {exc}") from None


def target_files(targets: Sequence[str]) -> list[Path]:
    """The files annotations are written to (`otlp-json:FILE`), of the targets that are files."""
    found = []
    for text in targets:
        if text != ORIGIN:
            target = parse_target(text, os.environ)
            if target.file:
                found.append(Path(target.location))
    return found


def check_live_inputs(inputs: Sequence[Path | str], targets: Sequence[str]) -> None:
    """Each live input answers and is the store its address names (one line, before any work)."""
    env = os.environ
    named = named_servers(targets, inputs, env)
    for item in inputs:
        found = source_server(item) if isinstance(item, str) and is_live(item) else None
        if found is not None:
            check_source(str(item), env, named.get(found[0], []))


def _input_destination(item: Path | str, fmt: str | None) -> str | None:
    reader = find_reader(str(item), fmt)
    return input_destination(str(item), reader.name if reader is not None else None)


def side_file(scored: Path, given: Path | None) -> Path:
    """Where failed annotations go: `given`, a side file itself when replaying one, else beside SCORED."""
    if given is not None:
        return given
    return scored if scored.name.endswith(SIDE_SUFFIX) else scored.with_name(scored.name + SIDE_SUFFIX)


Route = tuple[int, str | None, bool]  # the place of the target given, its text (None: no trace), whether the origin


@dataclass
class _Feed:
    """One target's rows: sent through its `delivery`, or kept because the target cannot be used (`refused`)."""

    text: str | None
    shown: str
    """The target's name in the side file."""
    delivery: Delivery | None = None
    refused: str | None = None
    rows: int = 0
    kept: list[dict[str, Any]] = field(default_factory=list)


class WriteBack:
    """Scored rows written back as they come, a chunk at a time (`add`); `finish` reports and keeps what failed.

    Each target given gets every row (`origin`: each row goes back to where it came from; a side
    file's rows to the target each names), through one `Delivery` per target for the whole run: no
    row is held beyond its target's batch, and the scores file is not read back. The deadline
    counts the time spent writing back, not the time the run takes to make the rows. Nothing is
    printed before `finish`, which reports target by target, in the order they were given.
    """

    def __init__(self, targets: Sequence[str], side: Path, *, threshold: float, inputs: Sequence[Path | str] = (),
                 timeout: float = DEFAULT_TIMEOUT, deadline: float | None = DEFAULT_DEADLINE,
                 replay: bool = False, earlier: list[Any] | None = None) -> None:
        if not targets and not replay:
            raise ConfigError("--to TARGET is needed: the rows of a scored output name no target (a side file's do)")
        env = self._env = os.environ
        self._named = named_servers(targets, inputs, env)
        for given in targets:  # each target given is usable, and its keys know their server, before anything is sent
            if given != ORIGIN:
                _keyed(parse_target(given, env), env, self._named)
        self._side, self._threshold, self._replay, self._spent = side, threshold, replay, 0.0
        self._since: float | None = None
        self._earlier = (read_side_file(side) or []) if earlier is None else earlier
        self._keys = {(str(r.get("id")), str(r.get("target"))) for r in self._earlier}
        self._retried: set[tuple[str, str]] = set()  # rows of the earlier side file tried again
        self._clock, self._policy = Clock(deadline, now=self._now), Policy(timeout=timeout)
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
            text = route[1]
            feed = self._feeds[route] = _Feed(text, str(text))
            if text is not None:
                try:
                    target = _keyed(parse_target(text, self._env), self._env, self._named)
                except ConfigError as exc:
                    feed.refused = str(exc)
                else:
                    feed.shown, feed.delivery = target.text, Delivery(target, threshold=self._threshold,
                                                                      policy=self._policy, clock=self._clock)
        return self._feeds[route]

    def add(self, rows: Iterable[Any]) -> None:
        """Hand over rows to write back, in the order of the scores file: a run's chunk, or a file's as a stream.

        They are sent on a thread of their own, so a slow store does not hold up the run (its event
        loop, whose page fetches have deadlines); at most `_WAITING` chunks wait for it.
        """
        stream = iter(rows)
        while chunk := list(itertools.islice(stream, _CHUNK)):
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
            feed.rows += len(group)
            if feed.refused is not None:
                feed.kept += [side_row(r, feed.shown) for r in group]
            elif feed.delivery is not None:
                feed.delivery.add(group)
            if feed.text is not None:
                self._retried.update(k for r in group if (k := (str(r.get("id")), feed.shown)) in self._keys)
        self._spent, self._since = self._now(), None

    def finish(self) -> int:
        """Send what waits, say what each target took, write the side file; returns the rows left in it."""
        if self._thread is not None:
            self._waiting.put(None)
            self._thread.join()
        if self._error is not None:
            raise self._error
        failures: list[dict[str, Any]] = []
        for route in sorted(self._feeds, key=lambda r: r[0]):  # the origins in the order their rows came
            failures += self._close(self._feeds[route], " (the rows' origin)" if route[2] else "")
        left = [r for r in self._earlier if (str(r.get("id")), str(r.get("target"))) not in self._retried] + failures
        write_side_file(self._side, left)
        if left:
            where = ", ".join(dict.fromkeys(str(r.get("target")) for r in left))
            print(f"tlmscore: {len(left)} rows not annotated, kept in {self._side} ({where}); replay with: "
                  f"tlmscore annotate {self._side}", file=sys.stderr)
        return len(left)

    def _close(self, feed: _Feed, of: str) -> list[dict[str, Any]]:
        """Finish one target's delivery; print what was written; the side rows that failed."""
        if feed.text is None:
            print(f"tlmscore: {NO_TRACE}: {feed.rows} rows", file=sys.stderr)
            return []
        if feed.delivery is None:
            print(f"tlmscore: warning: {feed.rows} rows not annotated: {feed.refused}", file=sys.stderr)
            return feed.kept
        target = feed.delivery.target
        store = connectors()[target.store]
        if store.keys.given(self._env) and not target.headers and not target.file:
            print(f"tlmscore: {feed.text}: sent without {', '.join(store.keys.secrets)}, which go only to the "
                  f"server {store.keys.servers[0]} names (or the one the command line names)", file=sys.stderr)
        self._since = time.monotonic()
        outcome = feed.delivery.close()
        self._spent, self._since = self._now(), None
        skipped = f" ({outcome.skipped} rows have no {store.annotates} to annotate)" if outcome.skipped else ""
        print(f"tlmscore: annotations to {feed.text}{of}: {outcome.written} of {outcome.rows} written{skipped}",
              file=sys.stderr)
        for error in outcome.errors:
            print(f"tlmscore: warning: annotations to {feed.text} failed: {error}", file=sys.stderr)
        if outcome.gave_up:
            print(f"tlmscore: warning: annotations to {feed.text}: {outcome.gave_up}", file=sys.stderr)
        return outcome.failed_rows


def _replayed(rows: list[Any], targets: list[str], env: Mapping[str, str]) -> tuple[list[Any], list[Any]]:
    """A side file's rows to replay (each to the target it names; `targets` picks some), and those left as they are."""
    wanted = {parse_target(t, env).text for t in targets if t != ORIGIN}
    if ORIGIN in targets:
        raise ConfigError("a side file's rows go back to the target each names: leave out --to origin "
                          f"(or give one of {', '.join(sorted({r['target'] for r in rows}))})")
    groups: dict[str | None, list[Any]] = {}
    for row in rows:
        groups.setdefault(row["target"], []).append(row)
    unknown = sorted(wanted - set(groups))
    if unknown:
        raise ConfigError(f"--to {unknown[0]}: no row of this side file failed there; its rows go back to "
                          f"{', '.join(sorted(map(str, groups)))} (leave out --to to replay them)")
    return ([r for t, g in groups.items() if not wanted or t in wanted for r in g],
            [r for t, g in groups.items() if wanted and t not in wanted for r in g])


def run_annotate(args: argparse.Namespace) -> int:
    """`tlmscore annotate`: SCORED's rows (streamed) or a side file's written back; exit 1 while rows are left."""
    side, replay = side_file(args.scored, args.failed), read_side_file(args.scored)
    chosen, untouched = _replayed(replay, args.to, os.environ) if replay is not None else ([], [])
    back = WriteBack(args.to, side, threshold=args.threshold, timeout=args.timeout, deadline=args.deadline,
                     replay=replay is not None, earlier=untouched if side == args.scored else None)
    back.add(chosen if replay is not None else read_rows(args.scored))
    return 1 if back.finish() else 0
