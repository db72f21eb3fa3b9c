"""Span and observation exports as rows: JSON lines, a JSON array, Parquet or CSV, read streaming.

Every reader of a tabular export (trace stores write the same rows in any of these) walks a file
with `rows`, one flat dict per row, numbered from 1, and `peek` gives the first row and the file's
kind to the registry's detection without reading further.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tlmscore._tables import rows, table_kind


@dataclass(frozen=True)
class Read:
    """One record a reader found, at `line` (a line or row number, from 1); `error` when it is unusable."""

    line: int
    record: dict[str, Any] | None = None
    error: str | None = None


def read_rows(numbered: Iterator[tuple[int, dict[str, Any] | str]],
              record: Callable[[dict[str, Any]], dict[str, Any] | None], what: str) -> Iterator[Read]:
    """The records `record` makes of numbered rows (None: the row is no call), in order.

    A message in place of a row, or a row `record` cannot read, is an error naming the row's
    number and (as "`what` ID") the row.
    """
    for number, row in numbered:
        if isinstance(row, str):
            yield Read(number, error=row)
            continue
        try:
            made = record(row)
        except (ValueError, TypeError, AttributeError) as exc:
            yield Read(number, error=f"{what} {row.get('id')}: {exc}")
            continue
        if made is not None:
            yield Read(number, made)


@dataclass(frozen=True)
class Peek:
    """What detection sees of a file: its kind (`jsonl`, `json`, `parquet`, `csv`) and first row."""

    path: Path
    kind: str
    first: Mapping[str, Any]


def peek(address: str) -> Peek | None:
    """The kind and first row of a table file, for detection; None when there is none to see."""
    path = Path(address)
    kind = table_kind(path)
    if kind is None or not path.is_file():
        return None
    if kind == "protobuf":
        return Peek(path, kind, {})
    try:
        for _, row in rows(path, kind):
            return Peek(path, kind, row) if isinstance(row, dict) else None
    except Exception:  # noqa: BLE001  (a file no table reader can open is left to the record reader)
        return None
    return None
