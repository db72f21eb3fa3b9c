"""The record contract the readers of logs (`stores`) and ingest share, so that ingest imports no store.

A record a reader found (`Read`), one holding only a stored response's id (`stored_id`), a live address (`is_live`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Read:
    """One record a reader found, at `line` (a line or row number, from 1); `error` when it is unusable."""

    line: int
    record: dict[str, Any] | None = None
    error: str | None = None


def stored_id(record: Any) -> str | None:
    """The response id of a record that holds nothing else of its call (a span export's), else None."""
    if not isinstance(record, dict) or any(k in record for k in ("response", "request", "output", "choices")):
        return None
    rid = record.get("response_id")
    return rid if isinstance(rid, str) and rid.strip() else None


def scheme(address: str) -> str | None:
    """The URL scheme of a live source's address (`phoenix`), lower case; None for a file."""
    found, sep, _ = address.partition("://")
    return found.lower() if sep and found.isalnum() else None


def is_live(address: str) -> bool:
    """Whether `address` is a live source's URL (`phoenix://…`, `mlflow://…`) rather than a file."""
    return scheme(address) is not None
