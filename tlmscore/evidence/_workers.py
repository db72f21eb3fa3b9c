"""The extraction pool: `extract` in separate processes, each page under a CPU and a memory limit.

lxml is not safe to drive from many threads of one process, and extraction costs CPU the event
loop cannot spare, so pages are extracted in worker *processes*. On Linux one template process,
spawned from a multiprocessing context of the pool's own (see `_processes.mp_context`), imports
trafilatura and warms up once, and forks each worker (`_template`); elsewhere each worker is
spawned and warms up by itself. Either way the workers are ready before the first body arrives.

One hostile page must cost only itself. Each worker takes one page at a time over its own pipe,
from a thread of the pool's own that feeds it the next page as soon as it answers (the largest
body waiting first), so a worker that dies takes no other page with it; its limits (CPU time,
memory, the end of the pool's process) are `_template`'s. The parent waits a generous wall time
on top of the CPU limit and kills a worker that still has not answered (`_processes.Worker`). A
worker that ends or is killed is replaced (and the template too, if it is gone); its page
becomes `extract_failed` with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import queue
import threading
from dataclasses import dataclass

from tlmscore._cores import cores
from tlmscore.evidence._processes import GoneError, LostError, Template, Worker
from tlmscore.evidence._template import CAN_FORK, Limits
from tlmscore.evidence.extract import Extracted, Extractor


@dataclass(frozen=True)
class _Job:
    """One page to extract, and where its answer goes: a future of the event loop that asked."""

    task: tuple[bytes, str | None, str, Extractor]
    answer: asyncio.Future[Extracted]


def _settle(answer: asyncio.Future[Extracted], found: Extracted) -> None:
    if not answer.done():
        answer.set_result(found)


_CLOSED = Extracted(None, None, "extract_failed", "the extraction pool closed before this page was extracted")


class ExtractPool:
    """Runs `extract` in worker processes, one page per worker at a time, overlapped with fetching.

    Each worker's thread takes the next page from one queue shared by all of them, the largest
    body first (the longest extractions start first, so a big page does not end up last, alone on
    one core), and never waits for the event loop between pages, however busy the loop is.
    Workers start on first use, or when `start` is called as a run sends its first request; a run
    that finds everything in the cache starts none.

    As with any use of worker processes, a script that runs tlmscore must keep its top-level
    work under `if __name__ == "__main__":`, since the workers import the main module.
    """

    def __init__(self, workers: int | None = None, limits: Limits | None = None,
                 extractor: Extractor = "recall") -> None:
        self._workers = workers or cores()
        self._limits = limits or Limits()
        self._extractor: Extractor = extractor
        self._jobs: queue.PriorityQueue[tuple[float, int, _Job | None]] = queue.PriorityQueue()
        self._order = itertools.count()  # ties between equal sizes: the page asked for first
        self._feeders: list[threading.Thread] = []
        self._counting = threading.Lock()
        self._unanswered = 0  # pages given to the pool and not answered yet
        self._busy: set[Worker] = set()  # the workers with a page now
        self._template: Template | None = None  # forks the workers (where workers are forked)
        self._forking = threading.Lock()  # one thread at a time starts or asks the template
        self._closed = False

    @property
    def pending(self) -> int:
        """Pages waiting for a worker or being extracted."""
        with self._counting:
            return self._unanswered

    @property
    def started(self) -> bool:
        """Whether worker processes exist (or are being started)."""
        return bool(self._feeders)

    def start(self) -> None:
        """Start the workers and their threads in the background, unless they are running; returns at once."""
        if self._feeders or self._closed:
            return
        for number in range(self._workers):
            feeder = threading.Thread(target=self._feed, name=f"tlmscore-extract-{number}", daemon=True)
            feeder.start()
            self._feeders.append(feeder)

    async def extract(self, body: bytes, content_type: str | None, url: str) -> Extracted:
        """Run `extract(body, content_type, url)` in a worker, within the pool's limits."""
        if self._closed:
            return _CLOSED
        self.start()
        job = _Job((body, content_type, url, self._extractor), asyncio.get_running_loop().create_future())
        with self._counting:
            self._unanswered += 1
        self._jobs.put((-len(body), next(self._order), job))
        return await job.answer

    def _feed(self) -> None:
        """One worker's thread: start the worker, then give it pages until the pool closes."""
        worker: Worker | None = None
        with contextlib.suppress(OSError):  # could not start: the first page tries again
            worker = self._ready(None)  # ready before the first body arrives
        while True:
            _, _, job = self._jobs.get()
            if job is None:
                break
            found = _CLOSED
            if not self._closed and not job.answer.cancelled():  # else nobody waits for the page
                try:
                    worker, found = self._run(worker, job.task)
                except Exception as exc:  # noqa: BLE001  (the page must get an answer, and the thread go on)
                    worker, found = None, Extracted(None, None, "extract_failed", f"{type(exc).__name__}: {exc}")
            self._answer(job, found)
        if worker is not None:
            worker.stop(kill=worker in self._busy)

    def _answer(self, job: _Job, found: Extracted) -> None:
        """Hand `found` to the waiting coroutine (nothing when it stopped waiting or its loop closed)."""
        with contextlib.suppress(RuntimeError):  # the loop has closed
            job.answer.get_loop().call_soon_threadsafe(_settle, job.answer, found)
        with self._counting:
            self._unanswered -= 1

    def _run(self, worker: Worker | None, task: tuple[bytes, str | None, str, Extractor],
             ) -> tuple[Worker | None, Extracted]:
        """Extract `task` in `worker` (or its replacement): the worker to use next, and the answer."""
        for _ in range(2):  # a second worker only when the first had ended before it got the page
            try:
                ready = self._ready(worker)
            except OSError as exc:  # a new worker could not be started
                return None, Extracted(None, None, "extract_failed", str(exc))
            self._busy.add(ready)
            try:
                return ready, ready.run(task)
            except GoneError:  # it had ended before it took the page: the page goes to a new one
                worker = None
            except LostError as exc:  # it ended or was killed on this page
                return None, Extracted(None, None, "extract_failed", str(exc))
            finally:
                self._busy.discard(ready)
        return None, Extracted(None, None, "extract_failed", "the text extractor could not be started")

    def _ready(self, worker: Worker | None) -> Worker:
        """A running worker: `worker` if it is alive, else a new one (the old one reaped)."""
        if worker is not None and worker.alive:
            return worker
        if worker is not None:
            worker.stop(kill=True)
        return self._new_worker()

    def _new_worker(self) -> Worker:
        """A new worker: forked from the template (started first if it is not running), else spawned."""
        if not CAN_FORK:
            if self._closed:
                raise OSError("the extraction pool is closed")
            return Worker(self._limits, None)
        with self._forking:
            try:
                return Worker(self._limits, self._running_template())
            except OSError:  # the template ended since it was last seen: start another, once
                return Worker(self._limits, self._running_template(replace=True))

    def _running_template(self, *, replace: bool = False) -> Template:
        """The template, started anew when there is none, it has ended, or `replace` says so."""
        if self._closed:
            raise OSError("the extraction pool is closed")
        template = self._template
        if template is None or replace or not template.alive:
            if template is not None:
                template.stop()
            template = self._template = Template(self._limits)
        return template

    async def aclose(self) -> None:
        """Stop the workers, then the template; a page still being extracted ends as `extract_failed`."""
        self._closed = True  # no page is started and no template is started from now on
        loop = asyncio.get_running_loop()
        # A worker with a page is killed: its thread sees it end, answers the page and stops.
        for worker in list(self._busy):
            worker.kill()
        for _ in self._feeders:
            self._jobs.put((-math.inf, next(self._order), None))  # ahead of every page still queued
        feeders, self._feeders = self._feeders, []
        # The template reaps the workers it forked; stopping it also ends the wait of a worker
        # still being started, so the threads and the template end together.
        template = self._template
        closing = [*(feeder.join for feeder in feeders), *([template.stop] if template is not None else [])]
        await asyncio.gather(*(loop.run_in_executor(None, stop) for stop in closing))
        late, self._template = self._template, None
        if late is not None and late is not template:  # started by a thread as the pool closed
            await loop.run_in_executor(None, late.stop)
        while not self._jobs.empty():  # pages no thread took (every thread has ended)
            _, _, job = self._jobs.get_nowait()
            if job is not None:
                self._answer(job, _CLOSED)
