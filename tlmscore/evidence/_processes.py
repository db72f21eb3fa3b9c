"""The extraction pool's handles on its processes: the template that forks workers, and a worker.

`mp_context` is the pool's own multiprocessing context; `Template` starts the template process
(`_template.serve_template`) and asks it for workers; `Worker` is one worker process (forked from
the template, or spawned where there is none) and the pool's end of its pipe, which gives it one
page at a time and kills it when it takes too long or is gone.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
from collections.abc import Callable
from multiprocessing.process import BaseProcess

from tlmscore.evidence._template import FORK, TAKEN, Limits, receive_worker, serve_spawned, serve_template
from tlmscore.evidence.extract import Extracted, Extractor

_START_SECONDS = 120.0  # how long a new worker may take to be ready (the template imports first)
_STOP_SECONDS = 5.0  # how long a closing pool waits for a process to exit before it kills it


def mp_context() -> multiprocessing.context.BaseContext:
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


def _spawn(target: Callable[[multiprocessing.connection.Connection, Limits], None],
           limits: Limits) -> tuple[multiprocessing.connection.Connection, BaseProcess]:
    """Start `target(child_end, limits)` in a new process; the parent's end of its pipe, and the process."""
    context = mp_context()
    conn, child = context.Pipe()
    process: BaseProcess = context.Process(  # type: ignore[attr-defined]
        target=target, args=(child, limits), daemon=True, name="tlmscore-extract")
    process.start()
    child.close()
    return conn, process


def _join(process: BaseProcess) -> None:
    """Wait for `process` to exit, a few seconds at most, then kill it."""
    process.join(timeout=_STOP_SECONDS)
    if process.is_alive():
        process.kill()
        process.join()


class LostError(Exception):
    """The worker ended or was killed while it had a page."""


class GoneError(Exception):
    """The worker had ended before it was given the page (the page can go to another)."""


class Template:
    """The template process (`_template.serve_template`) and the pool's end of its control pipe."""

    def __init__(self, limits: Limits) -> None:
        self._conn, self._process = _spawn(serve_template, limits)

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
        _join(self._process)
        self._conn.close()


class Worker:
    """One worker process and the parent's end of its pipe; used from one thread at a time.

    Forked from `template` when there is one, else spawned as a process of its own.
    """

    def __init__(self, limits: Limits, template: Template | None) -> None:
        self._limits = limits
        self._process: BaseProcess | None = None
        self._pid = 0
        if template is not None:
            self._pid, self._conn = template.fork()
        else:
            self._conn, self._process = _spawn(serve_spawned, limits)

    @property
    def alive(self) -> bool:
        """Whether the process is still running (a forked one: whether its pipe is still open)."""
        if self._process is not None:
            return self._process.is_alive()
        try:
            return not self._conn.poll(0)  # an idle worker sends nothing: readable means ended
        except OSError:
            return False

    def run(self, task: tuple[bytes, str | None, str, Extractor]) -> Extracted:
        """Extract one page; raise `LostError` if the worker is gone or has to be killed."""
        self._hand_over(task)
        try:
            if not self._conn.poll(self._limits.wall_seconds):
                self.stop(kill=True)
                raise LostError(f"extracting the text took more than {self._limits.wall_seconds:g} s")
            found: Extracted = self._conn.recv()
        except (EOFError, OSError) as exc:
            self.stop(kill=True)
            raise LostError("the text extractor ended on this page (it crashed or ran out of memory)") from exc
        return found

    def _hand_over(self, task: tuple[bytes, str | None, str, Extractor]) -> None:
        """Send the page; the worker says it has it before it starts, so one already gone is told apart."""
        try:
            self._conn.send(task)
            taken = self._conn.poll(self._limits.wall_seconds) and self._conn.recv() == TAKEN
        except (EOFError, OSError):
            taken = False
        if not taken:
            self.stop(kill=True)
            raise GoneError

    def kill(self) -> None:
        """Kill the process now (its pipe is left to the thread that uses it)."""
        with contextlib.suppress(OSError):
            if self._process is None:
                os.kill(self._pid, signal.SIGKILL)
            else:
                self._process.kill()

    def stop(self, *, kill: bool = False) -> None:
        """End the worker: ask it to exit, or kill it; then reap it (a forked one: its template does)."""
        if kill:
            self.kill()
        else:
            with contextlib.suppress(OSError):
                self._conn.send(None)
        if self._process is not None:
            _join(self._process)
        self._conn.close()
