"""The extraction workers' own side: a worker's limits and life, and the template that forks them.

Importing trafilatura and warming it up costs a new interpreter far more CPU than a typical page
does. So one *template* process, spawned by the pool, does that once and then forks every
worker on request (`serve_template`): each worker starts warm, as a copy of the template, in
milliseconds. The template is single-threaded and never runs a page, so forking it is safe; it
reaps the workers it forked and ends with the pool, or when the process that started it is gone.
Where `fork` or passing a socket between processes is missing, the pool spawns each worker as
an interpreter of its own (`serve_spawned`), which imports and warms up by itself.

Either way a worker takes one page at a time over its own pipe, under its limits:

- Time: a page may use `cpu_seconds` of CPU. A timer signal (`ITIMER_PROF`) ends the extraction
  with a Python exception when it runs out, and the worker goes on; `RLIMIT_CPU`, set a little
  above, kills a worker stuck in native code that never returns to Python.
- Memory: `RLIMIT_DATA` caps what a worker may allocate beyond what it started with (a warm
  worker), so a PDF or HTML bomb ends in `MemoryError` or, in native code, in the worker's end.
- Its parent: a watcher thread ends the worker when the process that started the pool is gone
  (for a forked worker too: it inherits the template's handle on that process).

This module imports no event loop and no pool machinery: it is all a worker needs.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from types import FrameType

from tlmscore.evidence.extract import WARM_UP_PAGE, Extracted, Extractor, extract, extract_safely

TAKEN = "taken"
"""What a worker answers as it takes a page, before it starts on it."""
FORK = "fork"
"""What the pool sends the template to have one more worker."""
CAN_FORK = hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform.startswith("linux")
"""Whether workers are forked from a template (Linux), rather than spawned one by one."""

_LOGGERS = ("trafilatura", "htmldate", "courlan", "justext", "pypdf", "charset_normalizer")
_HARD_CPU_MARGIN = 2.0  # RLIMIT_CPU: this many times the page's CPU limit, plus a second
_WALL_FACTOR = 4.0  # the parent's wall-time limit: this many times the CPU limit, plus `_WALL_SLACK`
_WALL_SLACK = 10.0
_REAP_EVERY = 1.0  # seconds between the template's checks for ended workers
_REAP_WAIT = 5.0  # seconds the template waits for its workers to end when it is told to stop
_BRIEF_PAGE = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>Ferry</title></head><body>"
    b"<nav><a href='/'>Home</a></nav><article><h1>Ferry</h1>"
    b"<p>The ferry leaves every twenty minutes from the north pier.</p></article>"
    b"<footer>Footer</footer></body></html>"
)


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


def _set_limit(name: str, soft: int) -> None:
    """Set the soft limit `resource.<name>` to `soft`, within its hard limit (where there are such limits)."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource  # noqa: PLC0415  (POSIX only)

        kind = getattr(resource, name)
        _, hard = resource.getrlimit(kind)
        resource.setrlimit(kind, (soft if hard < 0 else min(soft, hard), hard))


def _warm_up() -> None:
    """Make this process quiet and warm.

    Library log records and warnings stay off the user's terminal; trafilatura is imported and
    extracts `WARM_UP_PAGE` and `_BRIEF_PAGE`: it builds its tables on first use, and doing that
    here, while the first responses are still on their way, keeps that cost off the first real
    pages. The brief page is there for the path short pages take: too little text for
    trafilatura's own extractor, so it tries jusText, whose stop-word lists for every language it
    builds on first use (about a quarter of a second of CPU, more than most pages cost). What the
    imports and the warm-up made is then moved out of the cycle collector's reach (`gc.freeze`):
    it lives as long as the process, and a full collection in a worker would otherwise walk all
    of it, writing to every page it touches, which a forked worker must first copy from the
    template.

    The process keeps the priority it was started with: the fetching process, which mostly
    waits, gets a core as it wakes anyway, while a worker at a lower priority carries so little
    weight in the scheduler that, on a machine other programs use too, it runs at a fraction of a
    core whenever the fetching process is idle.
    """
    for name in _LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    warnings.simplefilter("ignore")
    for page in (WARM_UP_PAGE, _BRIEF_PAGE):
        extract(page, "text/html", "")
    gc.freeze()


def _bind_to_pool(limits: Limits) -> None:
    """Limit a warm worker's memory (counted from what it holds now) and end it with the pool's process."""
    now = _data_size()
    if now is not None:
        _set_limit("RLIMIT_DATA", now + limits.memory_bytes)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True).start()


def _exit_with(sentinel: int) -> None:
    """Wait until the pool's process is gone (its sentinel becomes readable), then exit."""
    multiprocessing.connection.wait([sentinel])
    os._exit(0)


def _timed_extract(body: bytes, content_type: str | None, url: str, extractor: Extractor,
                   limits: Limits) -> Extracted:
    """`extract_safely` under the CPU timer (where there is one)."""
    if not hasattr(signal, "setitimer"):
        return extract_safely(body, content_type, url, extractor)
    # a worker stuck in native code is killed (SIGXCPU) once it has used this much more CPU than so far
    _set_limit("RLIMIT_CPU", int(time.process_time() + limits.cpu_seconds * _HARD_CPU_MARGIN + 1) + 1)
    previous = signal.signal(signal.SIGPROF, _on_timer)
    try:
        signal.setitimer(signal.ITIMER_PROF, limits.cpu_seconds)
        return extract_safely(body, content_type, url, extractor)
    except _OutOfTimeError:
        return Extracted(None, None, "extract_failed",
                         f"extracting the text took more than {limits.cpu_seconds:g} s of CPU")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _serve_pages(conn: multiprocessing.connection.Connection, limits: Limits) -> None:
    """Take `(body, content_type, url, extractor)` from the pipe, send back `Extracted`, until told to stop."""
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(TAKEN)
        try:
            body, content_type, url, extractor = task
            conn.send(_timed_extract(body, content_type, url, extractor, limits))
        except _OutOfTimeError:  # the timer fired just after the page was done: the answer stands
            conn.send(Extracted(None, None, "extract_failed", "the extraction ran out of time"))


def serve_spawned(conn: multiprocessing.connection.Connection, limits: Limits) -> None:
    """A spawned worker's life: warm up, bind to the pool's process, serve pages."""
    _warm_up()
    _bind_to_pool(limits)
    _serve_pages(conn, limits)


def serve_template(control: multiprocessing.connection.Connection, limits: Limits) -> None:
    """The template's life: warm up once, then fork a worker for each `FORK` on `control`.

    Each new worker's end of its pipe is sent back over `control` (with its process id), so
    the pool talks to it directly. The template ends when it is sent None (after reaping its
    workers) or when the pool's process is gone (its workers end by themselves then).
    """
    _warm_up()
    parent = multiprocessing.parent_process()
    gone = [parent.sentinel] if parent is not None else []
    workers: set[int] = set()
    try:
        while True:
            ready = multiprocessing.connection.wait([control, *gone], timeout=_REAP_EVERY)
            _reap(workers)
            if any(handle in ready for handle in gone):
                return
            if control in ready:
                if control.recv() != FORK:
                    break
                workers.add(_fork(control, limits))
    except (EOFError, OSError):
        return
    _reap(workers, wait=_REAP_WAIT)


def _fork(control: multiprocessing.connection.Connection, limits: Limits) -> int:
    """Fork one worker and send the pool its end of the worker's pipe; the worker's process id."""
    ours, theirs = multiprocessing.Pipe()
    pid = os.fork()
    if pid == 0:  # the worker: it never returns into the template's loop
        code = 0
        try:
            control.close()
            ours.close()
            _bind_to_pool(limits)
            _serve_pages(theirs, limits)
        except BaseException:  # noqa: BLE001  (whatever happens, the copy of the template ends here)
            code = 1
        finally:
            os._exit(code)
    theirs.close()
    with socket.socket(fileno=os.dup(control.fileno())) as sock:
        socket.send_fds(sock, [str(pid).encode("ascii")], [ours.fileno()])
    ours.close()
    return pid


def _reap(workers: set[int], wait: float = 0.0) -> None:
    """Collect the workers that ended; with `wait`, wait that long for all of them, then kill the rest."""
    deadline = time.monotonic() + wait
    workers.difference_update([pid for pid in workers if _ended(pid, deadline, kill=wait > 0)])


def _ended(pid: int, deadline: float, *, kill: bool) -> bool:
    """Reap `pid` if it has ended, waiting until `deadline`; after that, kill and reap it when `kill`."""
    try:
        while os.waitpid(pid, os.WNOHANG)[0] == 0:
            if time.monotonic() >= deadline:
                if not kill:
                    return False
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.01)
    except ChildProcessError:  # already collected
        pass
    return True


def receive_worker(control: multiprocessing.connection.Connection) -> tuple[int, multiprocessing.connection.Connection]:
    """The pool's side of `_fork`: the new worker's process id and the pool's end of its pipe."""
    with socket.socket(fileno=os.dup(control.fileno())) as sock:
        message, fds, _, _ = socket.recv_fds(sock, 32, 1)
    if not fds:
        raise EOFError("the extraction template ended")
    return int(message), multiprocessing.connection.Connection(fds[0])
