"""What a watch keeps between runs, in one JSON file written whole or not at all after each batch.

- `watermark`: the start time of the newest call handled (ISO 8601). A poll asks the store for calls
  that started at or after `watermark - late` (a call is listed once it ends, so one that started
  earlier can arrive after newer ones), and passes over those in `seen`.
- `seen`: the calls handled that started within `late` of the watermark (key → start time), and
  no others: the set is bounded by the cursor, not by how long the watch runs.
- `evaluator`: the identity the calls were scored under (a changed one needs `--rescore`).
- `spend`: dollars planned in the current hour and day (`tlmscore.watch.Spend`), saved before a
  batch's requests are sent, so a restart does not forget what a window spent.
- `counts`: the totals the status line shows.

Written to a temporary file beside it, flushed to disk, then renamed over it (`os.replace`): a
kill at any point leaves the old state or the new one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tlmscore.errors import ConfigError

STATE_VERSION = 1


def parse_time(text: str) -> dt.datetime:
    """An ISO 8601 time as an aware datetime (UTC when it names no zone)."""
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


@dataclass
class State:
    """A watch's cursor, its spend, and its counts."""

    watermark: str | None = None
    seen: dict[str, str] = field(default_factory=dict)
    evaluator: str | None = None
    spend: dict[str, list[Any]] = field(default_factory=dict)
    counts: dict[str, float] = field(default_factory=dict)

    def since(self, late: float) -> dt.datetime | None:
        """Where a poll starts: `late` seconds before the watermark (None: from the store's first call)."""
        if self.watermark is None:
            return None
        return parse_time(self.watermark) - dt.timedelta(seconds=late)

    def handled(self, calls: dict[str, str], late: float) -> None:
        """Move past `calls` (key → start time): the watermark to the newest, `seen` to those still within `late`."""
        if not calls:
            return
        newest = max(parse_time(t) for t in calls.values())
        if self.watermark is None or newest > parse_time(self.watermark):
            self.watermark = newest.isoformat()
        self.seen.update(calls)
        floor = parse_time(self.watermark) - dt.timedelta(seconds=late)
        self.seen = {k: t for k, t in self.seen.items() if parse_time(t) >= floor}

    def to_json(self) -> dict[str, Any]:
        """The state as saved."""
        return {"version": STATE_VERSION, "watermark": self.watermark, "evaluator": self.evaluator,
                "seen": self.seen, "spend": self.spend, "counts": self.counts}


def load_state(path: Path) -> State:
    """The state saved at `path`; a fresh one when there is none; one `ConfigError` line when it is unreadable."""
    if not path.exists():
        return State()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable watch state ({exc}); move it away to start afresh") from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise ConfigError(f"{path}: not a watch state of version {STATE_VERSION}; move it away to start afresh")
    return State(data.get("watermark"), dict(data.get("seen") or {}), data.get("evaluator"),
                 dict(data.get("spend") or {}), dict(data.get("counts") or {}))


def save_state(path: Path, state: State) -> None:
    """Write the state whole: a temporary file, flushed to disk, renamed over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        json.dump(state.to_json(), handle, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)  # atomic (os.replace): the old state or the new one, never half
