"""Progress bars on a terminal (tqdm, on stderr); nothing at all when stderr is not a terminal.

`input` (bytes of the input files read, of their total: a percent and an estimate of the time
left) is the run's main bar; `records` counts the rows done (as the bar's postfix when there is an
input bar), `fetch`, `extract`… the evidence stages. Every bar starts its clock when the run
starts, so the first rate is not one chunk over a few microseconds, and a ticker redraws them every
`TICK` seconds, so elapsed time and rate move while a long chunk is scored.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any

from tqdm import tqdm

TICK = 1.0
"""Seconds between redraws of the bars while nothing reports progress."""
_MAIN = "input"
_RECORDS = "records"


class ProgressBars:
    """One bar per stage, fed by `update(stage, done, total)` (from any thread)."""

    def __init__(self, *, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._bars: dict[str, Any] = {}  # tqdm bars; tqdm's stubs type a bar without an iterable as tqdm[Never]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._started = time.time()

    def update(self, stage: str, done: int, total: int | None) -> None:
        """Move the bar of `stage` to `done` of `total`."""
        if not self.enabled:
            return
        with self._lock:
            if stage == _RECORDS and _MAIN in self._bars:
                self._bars[_MAIN].set_postfix_str(f"{done:,} records", refresh=True)
                return
            bar = self._bars.get(stage) or self._open(stage, total)
            if total is not None and bar.total != total:
                bar.total = total
            if done > bar.n:
                bar.update(done - bar.n)
            else:
                bar.refresh()

    def _open(self, stage: str, total: int | None) -> Any:
        """A new bar, its clock started with the run."""
        in_bytes = stage == _MAIN
        bar = tqdm(total=total, desc=stage, unit="B" if in_bytes else "", unit_scale=in_bytes,
                   unit_divisor=1024 if in_bytes else 1000, position=len(self._bars), leave=True,
                   file=sys.stderr, dynamic_ncols=True, mininterval=0.2)
        bar.start_t = bar.last_print_t = self._started
        self._bars[stage] = bar
        return bar

    def _tick(self) -> None:
        while not self._stop.wait(TICK):
            with self._lock:
                for bar in self._bars.values():
                    bar.refresh()

    def __enter__(self) -> ProgressBars:
        self._started = time.time()
        if self.enabled:
            self._ticker = threading.Thread(target=self._tick, name="tlmscore-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            for bar in self._bars.values():
                bar.close()
            self._bars.clear()
