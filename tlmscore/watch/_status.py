"""A watch's counts and its one status line: calls seen, scored, sampled out, skipped (by reason), cost, lag.

On a terminal the line is redrawn in place; elsewhere (a service's log) it is printed as a plain
line every `every` seconds, and once at the end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from tlmscore._cost import dollars


@dataclass
class Counts:
    """What a watch did since it started with its state (the totals are kept in the state between runs)."""

    seen: int = 0
    scored: int = 0
    annotated: int = 0
    sampled_out: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    cost_today: float = 0.0
    lag: float | None = None
    """Seconds from the end of the newest call of the last batch to its annotation."""
    down: str | None = None
    """Why the store does not answer, while it does not."""

    def skip(self, reason: str, count: int = 1) -> None:
        """Count `count` calls skipped for `reason`."""
        if count:
            self.skipped[reason] = self.skipped.get(reason, 0) + count

    def line(self) -> str:
        """The status line."""
        skipped = sum(self.skipped.values())
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(self.skipped.items()) if n)
        lag = "-" if self.lag is None else f"{self.lag:.1f} s"
        text = (f"watch: seen {self.seen} · scored {self.scored} · sampled out {self.sampled_out} · skipped "
                f"{skipped}{f' ({reasons})' if reasons else ''} · cost today {dollars(self.cost_today)} · lag {lag}")
        return text + (f" · store down: {self.down}" if self.down else "")

    def to_json(self) -> dict[str, float]:
        """The totals as the state keeps them."""
        kept: dict[str, float] = {"seen": self.seen, "scored": self.scored, "annotated": self.annotated,
                                  "sampled_out": self.sampled_out}
        return kept | {f"skipped.{reason}": n for reason, n in self.skipped.items()}

    @classmethod
    def of(cls, saved: dict[str, float]) -> Counts:
        """The totals a state kept."""
        counts = cls(int(saved.get("seen", 0)), int(saved.get("scored", 0)), int(saved.get("annotated", 0)),
                     int(saved.get("sampled_out", 0)))
        counts.skipped = {k.removeprefix("skipped."): int(v) for k, v in saved.items() if k.startswith("skipped.")}
        return counts


class StatusLine:
    """Shows `Counts`: redrawn in place on a terminal, else a plain line every `every` seconds."""

    def __init__(self, stream: TextIO | None = None, *, every: float = 60.0,
                 now: Callable[[], float] = time.monotonic) -> None:
        self._stream = stream or sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._every = every
        self._now = now
        self._last: float | None = None

    def show(self, counts: Counts) -> None:
        """Redraw the line (a terminal), or print it when `every` seconds have passed since the last."""
        if self._tty:
            self._stream.write("\r\x1b[2K" + counts.line())
            self._stream.flush()
            return
        now = self._now()
        if self._last is None or now - self._last >= self._every:
            self._last = now
            print(counts.line(), file=self._stream, flush=True)

    def note(self, text: str) -> None:
        """A line of its own (a cap reached, the store down), above the status line on a terminal."""
        print(("\r\x1b[2K" if self._tty else "") + f"tlmscore: {text}", file=self._stream, flush=True)

    def end(self, counts: Counts) -> None:
        """The last line, always printed."""
        print(("\r\x1b[2K" if self._tty else "") + counts.line(), file=self._stream, flush=True)
