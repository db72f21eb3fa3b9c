"""How many cores this process may run on: one worker process per core (extraction, scoring)."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
