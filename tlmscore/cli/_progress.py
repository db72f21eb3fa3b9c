"""Progress bars on a terminal (tqdm, on stderr); nothing when output is piped."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

from tqdm import tqdm


class ProgressBars:
    """One bar per stage (`records`, `fetch`, `extract`…), fed by `update(stage, done, total)`."""

    def __init__(self, *, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._bars: dict[str, Any] = {}  # tqdm bars; tqdm's stubs type a bar without an iterable as tqdm[Never]

    def update(self, stage: str, done: int, total: int | None) -> None:
        """Move the bar of `stage` to `done` of `total`."""
        if not self.enabled:
            return
        if stage not in self._bars:
            self._bars[stage] = tqdm(total=total, desc=stage, unit="", position=len(self._bars), leave=True,
                                     file=sys.stderr, dynamic_ncols=True)
        bar = self._bars[stage]
        if total is not None and bar.total != total:
            bar.total = total
        bar.n = done
        bar.refresh()

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
