"""Where each row goes back to, by its `origin` (pure): the target of a bare `--annotate`.

- `phoenix` rows (read live from `phoenix://HOST:PORT/PROJECT`, the row's `source`) → that Phoenix server;
- `otlp` and `openinference` rows (OpenTelemetry spans) → `otlp`, the endpoint in `OTEL_EXPORTER_OTLP_*`;
- `langfuse` rows → `langfuse` (`LANGFUSE_HOST`), `langsmith` rows → `langsmith` (`LANGSMITH_ENDPOINT`);
- any other row (plain records, stored responses pulled by id) has no trace to go back to: None.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

ORIGIN = "origin"
"""The target text that means "back to where each row came from" (what a bare `--annotate` stands for)."""
_BY_ORIGIN = {"otlp": "otlp", "openinference": "otlp", "langfuse": "langfuse", "langsmith": "langsmith"}


def _phoenix(source: Any) -> str | None:
    """The Phoenix server of a live `phoenix://` (or `phoenixs://`) address, as a target; else None."""
    if not isinstance(source, str):
        return None
    parts = urlsplit(source)
    if parts.scheme.lower() == "phoenix" and parts.netloc:
        return f"phoenix://{parts.netloc}"
    if parts.scheme.lower() == "phoenixs" and parts.netloc:
        return f"phoenix:https://{parts.netloc}"
    return None


def destination(row: dict[str, Any]) -> str | None:
    """The target a row goes back to, as `--to` text; None when it has no trace to go back to."""
    origin = row.get("origin")
    if origin == "phoenix":
        return _phoenix(row.get("source"))
    return _BY_ORIGIN.get(origin) if isinstance(origin, str) else None


def by_destination(rows: Sequence[dict[str, Any]]) -> dict[str | None, list[dict[str, Any]]]:
    """The rows grouped by where they go back to (None: nowhere), in the order each target is first met."""
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(destination(row), []).append(row)
    return groups


def input_destination(address: str, reader: str | None) -> str | None:
    """Where the rows of one input will go back to, known before reading: by the reader that reads it."""
    if reader == "phoenix":
        return _phoenix(address)
    return _BY_ORIGIN.get(reader) if reader is not None else None


def needed(destinations: Iterable[str | None]) -> list[str]:
    """The distinct targets, in order, without the rows that go nowhere."""
    return list(dict.fromkeys(d for d in destinations if d is not None))
