"""What a reader of logs is, and what every reader reads files with.

A reader (`SourceReader`) turns a file (or a live address) into transcript records, the dicts of
the record contract (`{"id", "request", "response", "metadata"}` plus the origin fields `origin`,
`trace_id`, `span_id` and, where something was lost on the way, `warnings`), which ingest
normalises as it does any record. Each store's module declares its readers on its connector (the
OTLP store's are the OTLP trace, log and OpenInference span files); `registry.READERS` is the one
table of them, with the `tlmscore.sources` entry points' (`SOURCES_GROUP`), where `find_reader`
picks a file's reader. A live source's address: `scheme`, `is_live`, and `with_window`, which puts
the command line's `--since`, `--until`, `--limit` into it. The table files themselves (JSON lines,
JSON, Parquet, CSV: `rows`, `table_kind`, `plain`, `json_cell`) are read by `tlmscore._tables`, which
output files read back share; `peek` and `read_rows` are what detection and span exports read.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tlmscore._tables import json_cell, plain, rows, table_kind
from tlmscore.stores._rows import Peek, Read, peek, read_rows

__all__ = ["SOURCES_GROUP", "Peek", "Read", "SourceReader", "is_live", "json_cell", "peek", "plain", "read_rows",
           "rows", "scheme", "table_kind", "with_window"]

SOURCES_GROUP = "tlmscore.sources"
"""The entry-point group of source readers from other packages."""


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


def scheme(address: str) -> str | None:
    """The URL scheme of a live source's address (`phoenix`), lower case; None for a file."""
    found, sep, _ = address.partition("://")
    return found.lower() if sep and found.isalnum() else None


def is_live(address: str) -> bool:
    """Whether `address` is a live source's URL (`phoenix://…`, `mlflow://…`) rather than a file."""
    return scheme(address) is not None


def with_window(address: str, since: str | None, until: str | None, limit: int | None) -> str:
    """A live source's address with the command line's window and cap in its query (values given only)."""
    given = {k: str(v) for k, v in (("since", since), ("until", until), ("limit", limit)) if v is not None}
    if not given:
        return address
    url = urllib.parse.urlsplit(address)
    query = dict(urllib.parse.parse_qsl(url.query)) | given
    return urllib.parse.urlunsplit(url._replace(query=urllib.parse.urlencode(query)))
