"""Extraction workers: `extract` in separate processes, each page under a CPU and a memory limit.

lxml is not safe to drive from many threads of one process, and extraction costs CPU the event
loop cannot spare, so pages are extracted in worker *processes*, started with `spawn` from a
multiprocessing context of the pool's own (see `_mp_context`). Each worker imports trafilatura and
extracts a warm-up page as it starts, before it takes a page, while the first responses are on
their way.

One hostile page must cost only itself. Each worker takes one page at a time over its own pipe,
so a worker that dies takes no other page with it:

- Time: a page may use `cpu_seconds` of CPU. A timer signal (`ITIMER_PROF`) ends the extraction
  with a Python exception when it runs out, and the worker goes on; `RLIMIT_CPU`, set a little
  above, kills a worker stuck in native code that never returns to Python; the parent waits a
  generous wall time on top and kills a worker that still has not answered.
- Memory: `RLIMIT_DATA` caps what a worker may allocate beyond what it started with, so a PDF
  or HTML bomb ends in `MemoryError` (that page's status) or, in native code, in the worker's end.
- A worker that ends or is killed is replaced; its page becomes `extract_failed` with the reason.

Limits are POSIX features (`resource`, `signal.setitimer`); where they are missing the worker
still runs pages one at a time and the parent's wall-time limit still holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from types import FrameType

from tlmscore.evidence.extract import Extracted, extract_safely

_WORKER_NICENESS = 10
_LOGGERS = ("trafilatura", "htmldate", "courlan", "justext", "pypdf", "charset_normalizer")
_HARD_CPU_MARGIN = 2.0  # RLIMIT_CPU: this many times the page's CPU limit, plus a second
_WALL_FACTOR = 4.0  # the parent's wall-time limit: this many times the CPU limit, plus `_WALL_SLACK`
_WALL_SLACK = 10.0
_TAKEN = "taken"


@dataclass(frozen=True)
class Limits:
    """What one page may cost a worker: CPU seconds, and bytes allocated beyond the worker's start."""

    cpu_seconds: float = 30.0
    memory_bytes: int = 512 * 2**20

    @property
    def wall_seconds(self) -> float:
        """How long the parent waits for a page before it kills the worker."""
        return self.cpu_seconds * _WALL_FACTOR + _WALL_SLACK


class _OutOfTimeError(BaseException):
    """Raised in a worker by the CPU timer; a BaseException, so no `except Exception` swallows it."""


def _on_timer(_signum: int, _frame: FrameType | None) -> None:
    raise _OutOfTimeError


def _data_size() -> int | None:
    """The worker's data segment now (Linux `VmData`), which `RLIMIT_DATA` is measured against."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:  # noqa: PTH123
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _limit_memory(budget: int) -> None:
    """Cap the worker's data segment at what it holds now plus `budget` bytes."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource  # noqa: PLC0415  (POSIX only)

        now = _data_size()
        if now is not None:
            _, hard = resource.getrlimit(resource.RLIMIT_DATA)
            soft = now + budget
            resource.setrlimit(resource.RLIMIT_DATA, (soft if hard < 0 else min(soft, hard), hard))


def _limit_cpu(seconds: float) -> None:
    """Kill the worker (SIGXCPU) once it has used `seconds` more CPU than it has so far."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource  # noqa: PLC0415  (POSIX only)

        usage = resource.getrusage(resource.RUSAGE_SELF)
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (soft if hard < 0 else min(soft, hard), hard))


def _init_worker(limits: Limits) -> None:
    """Prepare a worker: quiet, polite, warm, limited, and bound to the life of the process that started it.

    Library log records and warnings stay off the user's terminal. Workers run at a lower
    priority, so the fetching process never waits behind an extraction for a core. The warm-up
    (`warmup`) runs before the memory limit, which then counts from what a warm worker holds. A
    watcher thread ends the worker when its parent is gone, so a parent killed outright leaves none
    behind, even while the worker is busy with a page.
    """
    for name in _LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    warnings.simplefilter("ignore")
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(_WORKER_NICENESS)
    import tlmscore.evidence._warmup  # noqa: F401, PLC0415  (imported for its warm-up)

    _limit_memory(limits.memory_bytes)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True).start()


def _exit_with(sentinel: int) -> None:
    """Wait until the parent process is gone (its sentinel becomes readable), then exit."""
    multiprocessing.connection.wait([sentinel])
    os._exit(0)


def _timed_extract(body: bytes, content_type: str | None, url: str, limits: Limits) -> Extracted:
    """`extract_safely` under the CPU timer (where there is one)."""
    if not hasattr(signal, "setitimer"):
        return extract_safely(body, content_type, url)
    _limit_cpu(limits.cpu_seconds * _HARD_CPU_MARGIN + 1)
    previous = signal.signal(signal.SIGPROF, _on_timer)
    try:
        signal.setitimer(signal.ITIMER_PROF, limits.cpu_seconds)
        return extract_safely(body, content_type, url)
    except _OutOfTimeError:
        return Extracted(None, None, "extract_failed",
                         f"extracting the text took more than {limits.cpu_seconds:g} s of CPU")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _serve(conn: multiprocessing.connection.Connection, limits: Limits) -> None:
    """A worker's life: take `(body, content_type, url)` from the pipe, send back `Extracted`."""
    _init_worker(limits)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(_TAKEN)
        try:
            body, content_type, url = task
            conn.send(_timed_extract(body, content_type, url, limits))
        except _OutOfTimeError:  # the timer fired just after the page was done: the answer stands
            conn.send(Extracted(None, None, "extract_failed", "the extraction ran out of time"))


def _mp_context() -> multiprocessing.context.BaseContext:
    """The pool's own `spawn` context: new interpreters, started the same way on every platform.

    A context object leaves the host's multiprocessing settings alone (start method, forkserver
    preload list), whatever the default start method is (`forkserver` on Linux from Python 3.14).
    `fork` is avoided: the parent runs an event loop and helper threads, and forking a threaded
    process can leave a child holding a lock that nobody will release. `forkserver` is avoided
    too: its server is one per process, shared with the host, so warming it up means changing the
    host's preload list (and a server the host already started is never warmed); and on Python
    3.11 the server imports its preload modules with its working directory first on `sys.path`,
    so a `tlmscore` folder there (another checkout) would be what the workers run. A spawned
    worker gets the parent's `sys.path` and pays its own imports and warm-up instead.
    """
    return multiprocessing.get_context("spawn")


class _LostError(Exception):
    """The worker ended or was killed while it had a page."""


class _GoneError(Exception):
    """The worker had ended before it was given the page (the page can go to another)."""


class _Worker:
    """One worker process and the parent's end of its pipe; used from one thread at a time."""

    def __init__(self, limits: Limits) -> None:
        context = _mp_context()
        self._limits = limits
        self._conn, child = context.Pipe()
        self._process: BaseProcess = context.Process(  # type: ignore[attr-defined]
            target=_serve, args=(child, limits), daemon=True, name="tlmscore-extract")
        self._process.start()
        child.close()

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self._process.is_alive()

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
            taken = self._conn.poll(self._limits.wall_seconds) and self._conn.recv() == _TAKEN
        except (EOFError, OSError):
            taken = False
        if not taken:
            self.stop(kill=True)
            raise _GoneError

    def stop(self, *, kill: bool = False) -> None:
        """End the worker: ask it to exit, or kill it; then reap it."""
        with contextlib.suppress(OSError):
            if kill:
                self._process.kill()
            else:
                self._conn.send(None)
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
        worker = _Worker(self._limits)
        self._all.add(worker)
        return worker

    async def aclose(self) -> None:
        """Stop the workers; a page still being extracted ends as `extract_failed`."""
        self._idle = None
        loop = asyncio.get_running_loop()
        workers, self._all = list(self._all), set()
        # An idle worker is asked to exit; one with a page is killed (its pipe is in use).
        stops = [loop.run_in_executor(None, functools.partial(w.stop, kill=w in self._busy)) for w in workers]
        await asyncio.gather(*stops, return_exceptions=True)
        await loop.run_in_executor(None, self._threads.shutdown)


def _cores() -> int:
    """Count the cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
