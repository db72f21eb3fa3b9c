"""The delivery loop: one target's annotations in batches, retried, under a deadline, the failures kept.

Written once for every store (`tlmscore.stores.Connector` says what a batch is sent as), for rows
handed over at once (`deliver`) or chunk by chunk as a run makes them (`Delivery`):

- batches of the store's size (Phoenix and MLflow 100, the others 512), each retried up to
  `attempts` times (0.5 s, then 1 s apart) while its failure may pass (a timeout, HTTP 408, 429 or
  5xx); the items a store stored are counted, and only the others are sent again;
- a target that fails `give_up_after` attempts in a row (3: a batch's three tries, or three batches
  refused) is given up at once (`tlmscore._breaker`, as the model clients give up an endpoint): the
  rows not yet sent go straight to the side file, in one line;
- a total `deadline` (seconds, for every target of a run): when it passes, what is left goes to the
  side file; no request waits longer than `timeout`;
- every row that is not written is kept, as a side file row naming the target it failed at.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tlmscore._breaker import Breaker
from tlmscore.annotate._values import annotations_of, side_row
from tlmscore.errors import ConfigError
from tlmscore.output import Row, read_rows
from tlmscore.stores import Session, Target, connectors, keyed
from tlmscore.stores import parse_target as store_target


@dataclass(frozen=True)
class Policy:
    """How hard a delivery tries: attempts per batch, their backoff, a request's timeout, when to give up."""

    attempts: int = 3
    backoff: float = 0.5
    timeout: float = 20.0
    give_up_after: int = 3
    batch_size: int | None = None
    """Annotations per batch; the store's own when None."""


@dataclass
class Outcome:
    """What a delivery did: annotations written, rows skipped (no ids to annotate by), rows failed and why."""

    target: str
    rows: int = 0
    written: int = 0
    skipped: int = 0
    failed_rows: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    gave_up: str | None = None


@dataclass
class Clock:
    """The run's deadline (Unix monotonic seconds; None: none) and how waiting is done (tests pass their own)."""

    deadline: float | None = None
    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def passed(self) -> bool:
        """Whether the deadline has passed."""
        return self.deadline is not None and self.now() >= self.deadline

    def wait(self, seconds: float) -> None:
        """Sleep `seconds`, never past the deadline."""
        left = seconds if self.deadline is None else min(seconds, self.deadline - self.now())
        if left > 0:
            self.sleep(left)


@dataclass
class _Run:
    """One target's delivery as it goes: failed attempts in a row (its breaker), and why it stopped (None: not)."""

    policy: Policy
    clock: Clock
    stopped: str | None = None
    breaker: Breaker = field(init=False)

    def __post_init__(self) -> None:
        self.breaker = Breaker(self.policy.give_up_after)

    def attempted(self, stored: int, failures: Sequence[Any]) -> None:
        """Count an attempt; after `give_up_after` failed ones in a row, stop."""
        if stored or not failures:
            self.breaker.succeeded()
        else:
            self.breaker.failed(failures[-1].reason)
        if self.stopped is None and self.breaker.opened is not None:
            self.stopped = self.breaker.opened

    def may_send(self) -> bool:
        if self.stopped is None and self.clock.passed():
            self.stopped = "the deadline passed"
        return self.stopped is None


def _batch(target: Target, batch: Sequence[tuple[Mapping[str, Any], Any]], session: Session, run: _Run,
           outcome: Outcome) -> dict[int, str]:
    """Send one batch until it is stored, its failures are final, or the run stops; returns why each item failed."""
    connector = connectors()[target.store]
    pending = list(range(len(batch)))
    failed: dict[int, str] = {}
    tries = 0
    while pending and tries < run.policy.attempts:
        if tries:
            run.clock.wait(run.policy.backoff * 2 ** (tries - 1))
        if not run.may_send():
            break
        tries += 1
        sent = connector.send(target, [batch[i][1] for i in pending], session)
        outcome.written += sent.count
        failures = [(i, item) for i, item in zip(pending, sent.items, strict=True) if item is not None]
        run.attempted(sent.count, [item for _, item in failures])
        for i in pending:
            failed.pop(i, None)
        failed.update((i, item.reason) for i, item in failures)
        pending = [i for i, item in failures if item.retry]
    for i in pending:  # still failing when the tries ran out or the run stopped, or never tried
        failed[i] = f"{failed[i]} (after {tries} attempts)" if i in failed and tries > 1 else \
            failed.get(i, run.stopped or "not sent")
    return failed


def _report(outcome: Outcome, first: int, size: int, failed: Mapping[int, str]) -> None:
    """One line per reason a batch's rows failed: `rows 1-100: HTTP 503 (after 3 attempts)`."""
    for reason, count in Counter(failed.values()).items():
        share = "" if count == size else f"{count} of {size}: "
        outcome.errors.append(f"rows {first}-{first + size - 1}: {share}{reason}")


class Delivery:
    """One target's delivery, fed rows chunk by chunk (`add`) as a run makes them; `close` sends the rest.

    Rows wait only until they fill a batch of the store's size: batches, their numbers in the
    report, the breaker and the deadline run across chunks as over one list of rows. Rows without
    the ids the store annotates by (a span, a trace, a run) are counted in `skipped`. `evaluator`
    is who scored them, carried by every annotation (see `Annotation.evaluator`). `on_batch` is
    called after each batch, when `handled` (the rows before the first one still waiting) has moved.
    """

    def __init__(self, target: Target, *, threshold: float = 0.5, policy: Policy | None = None,
                 clock: Clock | None = None, transport: httpx.BaseTransport | None = None,
                 time_unix_nano: int | None = None, evaluator: Mapping[str, str] | None = None,
                 on_batch: Callable[[], None] | None = None) -> None:
        self.target, self.outcome = target, Outcome(target.text)
        self._threshold, self._evaluator, self._on_batch = threshold, evaluator, on_batch
        policy = policy or Policy()
        self._run = _Run(policy, clock or Clock())
        self._connector = connectors()[target.store]
        self._size = policy.batch_size or self._connector.batch_size or 1
        client = httpx.Client(transport=transport, timeout=policy.timeout)
        self._session = Session(client, policy.timeout, time.time_ns() if time_unix_nano is None else time_unix_nano)
        self._waiting: list[tuple[Mapping[str, Any], Any]] = []
        self._places: list[int] = []  # the place of each waiting row among the rows taken
        self._sent = 0

    @property
    def handled(self) -> int:
        """How many of the rows taken are done with (written, skipped or failed), none after one still waiting."""
        return self._places[0] if self._places else self.outcome.rows

    def add(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Take rows; each full batch is sent now."""
        made = [dataclasses.replace(a, evaluator=self._evaluator) for a in annotations_of(rows, self._threshold)]
        paired = [(row, self._connector.payload(a)) for row, a in zip(rows, made, strict=True)]
        reachable = [(at, (row, payload)) for at, (row, payload) in enumerate(paired, self.outcome.rows)
                     if payload is not None]
        self.outcome.rows += len(rows)
        self.outcome.skipped += len(rows) - len(reachable)
        self._places += [at for at, _ in reachable]
        self._waiting += [pair for _, pair in reachable]
        while len(self._waiting) >= self._size:
            self._send(self._size)

    def _send(self, size: int) -> None:
        batch, self._waiting, self._places = self._waiting[:size], self._waiting[size:], self._places[size:]
        run, outcome = self._run, self.outcome
        failed = _batch(self.target, batch, self._session, run, outcome)  # none sent once the run has stopped
        if failed and not (run.stopped and set(failed.values()) == {run.stopped}):
            _report(outcome, self._sent + 1, len(batch), failed)
        outcome.failed_rows.extend(side_row(batch[i][0], self.target.text) for i in sorted(failed))
        self._sent += len(batch)
        if self._on_batch is not None:
            self._on_batch()

    def close(self) -> Outcome:
        """Send the rows still waiting; what was written, skipped and kept."""
        if self._waiting:
            self._send(len(self._waiting))
        self._session.client.close()
        if self._run.stopped:
            self.outcome.gave_up = f"{self._run.stopped}; {len(self.outcome.failed_rows)} rows kept to replay"
        return self.outcome


def deliver(rows: Sequence[Mapping[str, Any]], target: Target, *, threshold: float = 0.5,
            policy: Policy | None = None, clock: Clock | None = None,
            transport: httpx.BaseTransport | None = None, time_unix_nano: int | None = None,
            evaluator: Mapping[str, str] | None = None) -> Outcome:
    """Write the annotations of `rows` to `target`, one `Delivery`; what fails is reported and kept, never raised."""
    delivery = Delivery(target, threshold=threshold, policy=policy, clock=clock, transport=transport,
                        time_unix_nano=time_unix_nano, evaluator=evaluator)
    delivery.add(rows)
    return delivery.close()


def parse_target(text: str, env: Mapping[str, str]) -> Target:
    """`--to TEXT` as a target, with its store's keys from `env` when they are for its server.

    The caller names the target (as `--to` does), so the keys go to it unless a variable names
    another server for them (`PHOENIX_ENDPOINT`, `LANGFUSE_HOST`, …; see `tlmscore.stores.credentials`).
    """
    found = store_target(text, env)
    return keyed(found, env, [found.location])


def read_side_file(path: Path) -> list[Row] | None:
    """The rows of a side file (rows that name their `target`); None when `path` is not one."""
    if not path.is_file() or path.suffix.lower() != ".jsonl":
        return None
    rows: list[Row] = []
    try:
        for row in read_rows(path):
            if "target" not in row:
                return None  # a scored output: its rows name no target
            rows.append(row)
    except ConfigError:
        return None
    return rows


def write_side_file(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """The rows whose annotations failed, as JSON lines `tlmscore annotate` reads; removed when there are none."""
    if not rows:
        path.unlink(missing_ok=True)
        return
    path.write_text("".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
