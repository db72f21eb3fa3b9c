"""What a reader of logs is, and what every reader reads files with.

A reader (`SourceReader`) turns a file (or a live address) into transcript records, the dicts of
the record contract (`{"id", "request", "response", "metadata"}` plus the origin fields `origin`,
`trace_id`, `span_id` and, where something was lost on the way, `warnings`), which ingest
normalises as it does any record. Each store's module declares its readers on its connector (the
OTLP store's are the OTLP trace, log and OpenInference span files); `registry.READERS` is the one
table of them, with the `tlmscore.sources` entry points' (`SOURCES_GROUP`), where `find_reader`
picks a file's reader. `Read` is `tlmscore._contract`'s, which ingest shares; `with_window` puts
the command line's `--since`, `--until`, `--limit` into a live source's address. Span and
observation exports (JSON lines, JSON, Parquet, CSV: `rows`, `table_kind`, `plain`, `json_cell`)
are read streaming by `tlmscore._tables`, which output files read back share: one flat dict per
row, numbered from 1. `peek` gives detection a file's kind and first row without reading further;
`read_rows` makes a reader's records of the rows.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tlmscore._contract import Read
from tlmscore._tables import json_cell, plain, rows, table_kind

__all__ = ["SOURCES_GROUP", "Peek", "Read", "SourceReader", "json_cell", "peek", "plain", "read_rows", "rows",
           "table_kind", "texts", "with_window"]

SOURCES_GROUP = "tlmscore.sources"
"""The entry-point group of source readers from other packages."""


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


def texts(value: Any) -> Iterator[str]:
    """Every text in a nested JSON value (objects and lists), in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (Mapping, list)):
        for item in value.values() if isinstance(value, Mapping) else value:
            yield from texts(item)


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


@dataclass(frozen=True)
class SourceReader:
    """A kind of log: `detect(peek)` says whether a file is one; `read(address)` yields its records.

    `schemes` are the URL schemes of a live source (`phoenix`), read from the address itself;
    `wants` says what a file's rows must hold for `detect` (for the message when no reader matches a table).
    """

    name: str
    detect: Callable[[Peek], bool]
    read: Callable[[str], Iterator[Read]]
    schemes: tuple[str, ...] = ()
    wants: str = ""


def with_window(address: str, since: str | None, until: str | None, limit: int | None) -> str:
    """A live source's address with the command line's window and cap in its query (values given only)."""
    given = {k: str(v) for k, v in (("since", since), ("until", until), ("limit", limit)) if v is not None}
    if not given:
        return address
    url = urllib.parse.urlsplit(address)
    query = dict(urllib.parse.parse_qsl(url.query)) | given
    return urllib.parse.urlunsplit(url._replace(query=urllib.parse.urlencode(query)))
