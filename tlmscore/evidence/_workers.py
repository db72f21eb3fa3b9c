"""The extraction pool: `extract` in separate processes, each page under a CPU and a memory limit.

lxml is not safe to drive from many threads of one process, and extraction costs CPU the event
loop cannot spare, so pages are extracted in worker *processes*. On Linux one template process,
spawned from a multiprocessing context of the pool's own (see `_mp_context`), imports trafilatura
and warms up once, and forks each worker (`_template`); elsewhere each worker is spawned and
warms up by itself. Either way the workers are ready before the first body arrives.

One hostile page must cost only itself. Each worker takes one page at a time over its own pipe,
so a worker that dies takes no other page with it; its limits (CPU time, memory, the end of the
pool's process) are `_template`'s. The parent waits a generous wall time on top of the CPU limit
and kills a worker that still has not answered. A worker that ends or is killed is replaced (and
the template too, if it is gone); its page becomes `extract_failed` with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.process import BaseProcess

from tlmscore.evidence._template import CAN_FORK, FORK, TAKEN, Limits, receive_worker, serve_spawned, serve_template
from tlmscore.evidence.extract import Extracted

_START_SECONDS = 120.0  # how long a new worker may take to be ready (the template imports first)
_STOP_SECONDS = 5.0  # how long a closing pool waits for a process to exit before it kills it


def _mp_context() -> multiprocessing.context.BaseContext:
    """The pool's own `spawn` context: new interpreters, started the same way on every platform.

    A context object leaves the host's multiprocessing settings alone (start method, forkserver
    preload list), whatever the default start method is (`forkserver` on Linux from Python 3.14).
    `fork` is avoided: the parent runs an event loop and helper threads, and forking a threaded
    process can leave a child holding a lock that nobody will release. `forkserver` is avoided
    too: its server is one per process, shared with the host, so warming it up means changing the
    host's preload list (and a server the host already started is never warmed); and on Python
    3.11 the server imports its preload modules with its working directory first on `sys.path`,
    so a `tlmscore` folder there (another checkout) would be what the workers run. The spawned
    template gets the parent's `sys.path` and pays the imports and warm-up once for all the
    workers it forks (a forked copy of a single-threaded process that has no event loop).
    """
    return multiprocessing.get_context("spawn")


class _LostError(Exception):
    """The worker ended or was killed while it had a page."""


class _GoneError(Exception):
    """The worker had ended before it was given the page (the page can go to another)."""


class _Template:
    """The template process (`_template.serve_template`) and the pool's end of its control pipe."""

    def __init__(self, limits: Limits) -> None:
        context = _mp_context()
        self._conn, child = context.Pipe()
        self._process: BaseProcess = context.Process(  # type: ignore[attr-defined]
            target=serve_template, args=(child, limits), daemon=True, name="tlmscore-extract")
        self._process.start()
        child.close()

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self._process.is_alive()

    def fork(self) -> tuple[int, multiprocessing.connection.Connection]:
        """A new worker: its process id and the pool's end of its pipe (OSError if the template is gone)."""
        try:
            self._conn.send(FORK)
            if not self._conn.poll(_START_SECONDS):
                raise OSError("the text extractor took too long to start")
            return receive_worker(self._conn)
        except EOFError as exc:
            raise OSError("the text extractor's template ended") from exc

    def stop(self) -> None:
        """Ask the template to reap its workers and exit; kill it if it does not."""
        with contextlib.suppress(OSError):
            self._conn.send(None)
        self._process.join(timeout=_STOP_SECONDS)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()


class _Worker:
    """One worker process and the parent's end of its pipe; used from one thread at a time.

    Forked from `template` when there is one, else spawned as a process of its own.
    """

    def __init__(self, limits: Limits, template: _Template | None) -> None:
        self._limits = limits
        self._process: BaseProcess | None = None
        self._pid = 0
        if template is not None:
            self._pid, self._conn = template.fork()
            return
        context = _mp_context()
        self._conn, child = context.Pipe()
        self._process = context.Process(  # type: ignore[attr-defined]
            target=serve_spawned, args=(child, limits), daemon=True, name="tlmscore-extract")
        self._process.start()
        child.close()

    @property
    def alive(self) -> bool:
        """Whether the process is still running (a forked one: whether its pipe is still open)."""
        if self._process is not None:
            return self._process.is_alive()
        try:
            return not self._conn.poll(0)  # an idle worker sends nothing: readable means ended
        except OSError:
            return False

    def run(self, task: tuple[bytes, str | None, str]) -> Extracted:
        """Extract one page; raise `_LostError` if the worker is gone or has to be killed."""
        self._hand_over(task)
        try:
            if not self._conn.poll(self._limits.wall_seconds):
                self.stop(kill=True)
                raise _LostError(f"extracting the text took more than {self._limits.wall_seconds:g} s")
            found: Extracted = self._conn.recv()
        except (EOFError, OSError) as exc:
            self.stop(kill=True)
            raise _LostError("the text extractor ended on this page (it crashed or ran out of memory)") from exc
        return found

    def _hand_over(self, task: tuple[bytes, str | None, str]) -> None:
        """Send the page; the worker says it has it before it starts, so one already gone is told apart."""
        try:
            self._conn.send(task)
            taken = self._conn.poll(self._limits.wall_seconds) and self._conn.recv() == TAKEN
        except (EOFError, OSError):
            taken = False
        if not taken:
            self.stop(kill=True)
            raise _GoneError

    def stop(self, *, kill: bool = False) -> None:
        """End the worker: ask it to exit, or kill it; then reap it (a forked one: its template does)."""
        with contextlib.suppress(OSError):
            if kill and self._process is None:
                os.kill(self._pid, signal.SIGKILL)
            elif kill and self._process is not None:
                self._process.kill()
            else:
                self._conn.send(None)
        if self._process is not None:
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
        self._conn.close()


class ExtractPool:
    """Runs `extract` in worker processes, one page per worker at a time, overlapped with fetching.

    Workers start on first use, or when `start` is called as a run sends its first request, on a
    thread (starting a process waits on it; the event loop must not). A run that finds
    everything in the cache starts none. A page whose worker dies or runs out of time gets
    status `extract_failed` and its worker is replaced; the other pages never notice.

    As with any use of worker processes, a script that runs tlmscore must keep its top-level
    work under `if __name__ == "__main__":`, since the workers import the main module.
    """

    def __init__(self, workers: int | None = None, limits: Limits | None = None) -> None:
        self._workers = workers or _cores()
        self._limits = limits or Limits()
        self._threads = ThreadPoolExecutor(self._workers, thread_name_prefix="tlmscore-extract")
        self._idle: asyncio.Queue[_Worker | None] | None = None
        self._all: set[_Worker] = set()  # every worker started and not yet stopped
        self._busy: set[_Worker] = set()  # the workers with a page now
        self._template: _Template | None = None  # forks the workers (where workers are forked)
        self._forking = threading.Lock()  # one thread at a time starts or asks the template
        self._closed = False

    @property
    def workers(self) -> int:
        """How many extractions run at once."""
        return self._workers

    @property
    def started(self) -> bool:
        """Whether worker processes exist (or are being started)."""
        return self._idle is not None

    def start(self) -> None:
        """Start the workers in the background (on threads), unless they are running; returns at once."""
        if self._idle is None:
            self._idle = asyncio.Queue()
            loop = asyncio.get_running_loop()
            for _ in range(self._workers):
                spawn = loop.run_in_executor(self._threads, self._ready, None)
                spawn.add_done_callback(functools.partial(self._started, self._idle))

    def _started(self, idle: asyncio.Queue[_Worker | None], spawn: asyncio.Future[_Worker]) -> None:
        """Hand a new worker to the pages waiting (None if it failed to start: the next page retries)."""
        failed = spawn.cancelled() or spawn.exception() is not None
        worker = None if failed else spawn.result()
        if idle is not self._idle:  # the pool closed while the worker started
            if worker is not None:
                self._all.discard(worker)
                worker.stop(kill=True)  # nothing to wait for: it never had a page
            return
        idle.put_nowait(worker)

    async def extract(self, body: bytes, content_type: str | None, url: str) -> Extracted:
        """Run `extract(body, content_type, url)` in a worker, within the pool's limits."""
        self.start()
        assert self._idle is not None  # noqa: S101 -- set by start()
        idle = self._idle
        worker = await idle.get()
        try:
            for _ in range(2):  # a second worker only when the first had ended before it got the page
                worker, found = await self._attempt(worker, (body, content_type, url))
                if found is not None:
                    return found
            return Extracted(None, None, "extract_failed", "the text extractor could not be started")
        except (_LostError, OSError) as exc:  # OSError: a new worker could not be started
            worker = None
            return Extracted(None, None, "extract_failed", str(exc))
        finally:
            idle.put_nowait(worker)

    async def _attempt(self, worker: _Worker | None, task: tuple[bytes, str | None, str],
                       ) -> tuple[_Worker | None, Extracted | None]:
        """Give `task` to a running worker: the worker and its answer, or (None, None) if it was gone."""
        loop = asyncio.get_running_loop()
        ready = await loop.run_in_executor(self._threads, self._ready, worker)
        self._busy.add(ready)
        try:
            return ready, await loop.run_in_executor(self._threads, ready.run, task)
        except _GoneError:
            return None, None
        finally:
            self._busy.discard(ready)

    def _ready(self, worker: _Worker | None) -> _Worker:
        """A running worker: `worker` if it is alive, else a new one (the old one reaped)."""
        if worker is not None and worker.alive:
            return worker
        if worker is not None:
            worker.stop(kill=True)
            self._all.discard(worker)
        worker = self._new_worker()
        self._all.add(worker)
        return worker

    def _new_worker(self) -> _Worker:
        """A new worker: forked from the template (started first if it is not running), else spawned."""
        if not CAN_FORK:
            return _Worker(self._limits, None)
        with self._forking:
            try:
                return _Worker(self._limits, self._running_template())
            except OSError:  # the template ended since it was last seen: start another, once
                return _Worker(self._limits, self._running_template(replace=True))

    def _running_template(self, *, replace: bool = False) -> _Template:
        """The template, started anew when there is none, it has ended, or `replace` says so."""
        if self._closed:
            raise OSError("the extraction pool is closed")
        template = self._template
        if template is None or replace or not template.alive:
            if template is not None:
                template.stop()
            template = self._template = _Template(self._limits)
        return template

    async def aclose(self) -> None:
        """Stop the workers, then the template; a page still being extracted ends as `extract_failed`."""
        self._idle = None
        self._closed = True  # no template is started from now on
        loop = asyncio.get_running_loop()
        workers, self._all = list(self._all), set()
        # An idle worker is asked to exit; one with a page is killed (its pipe is in use).
        stops = [loop.run_in_executor(None, functools.partial(w.stop, kill=w in self._busy)) for w in workers]
        await asyncio.gather(*stops, return_exceptions=True)
        # The template reaps the workers it forked; stopping it also ends the wait of any worker
        # still being started (the threads), so both go at once.
        template = self._template
        closing = [self._threads.shutdown, *([template.stop] if template is not None else [])]
        await asyncio.gather(*(loop.run_in_executor(None, stop) for stop in closing))
        late, self._template = self._template, None
        if late is not None and late is not template:  # started by a thread as the pool closed
            await loop.run_in_executor(None, late.stop)


def _cores() -> int:
    """Count the cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
