"""The processes under a process and their CPU time, read from /proc while threads and processes come and go."""

from __future__ import annotations

import contextlib
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every process under `pid`, children first.

    A thread or process may end between listing `/proc/<pid>/task` and reading a task's `children`
    (the pool's threads and the interpreter's helpers do): what has ended has no children to report.
    """
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        for task in tasks:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                for child in (task / "children").read_text().split():
                    found += [int(child), *descendants(int(child))]
    return found


def cpu_ticks(pids: list[int]) -> int:
    """The CPU the processes used so far, in clock ticks (utime + stime of /proc/<pid>/stat); one ended adds none."""
    total = 0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total
