"""What a reader of logs is, and the readers of formats no one store owns.

A reader (`SourceReader`) turns a file (or a live address) into transcript records, the dicts of
the record contract (`{"id", "request", "response", "metadata"}` plus the origin fields `origin`,
`trace_id`, `span_id` and, where something was lost on the way, `warnings`), which ingest
normalises as it does any record. `GENERIC` holds the readers of file formats no one store owns
(OpenInference span exports, OTLP traces and logs); each trace store brings its own, and the registry of
every reader (with the `tlmscore.sources` entry points', `SOURCES_GROUP`) is
`tlmscore.stores.readers`, where `find_reader` picks a file's reader.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from tlmscore.sources import _openinference, _otlp, _otlp_logs
from tlmscore.sources._tables import Peek, Read

__all__ = ["GENERIC", "SOURCES_GROUP", "Peek", "Read", "SourceReader", "is_live", "scheme", "with_window"]

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


GENERIC: Mapping[str, SourceReader] = MappingProxyType({r.name: r for r in (
    SourceReader("openinference", _openinference.detect, _openinference.read,
                 wants="`context.span_id` and an OpenInference span kind (`span_kind`, `attributes.openinference…`)"),
    SourceReader("otlp", _otlp.detect, _otlp_logs.read_spans, wants="`resourceSpans` (OTLP JSON) or a protobuf body"),
    SourceReader("otlp-logs", _otlp_logs.detect, _otlp_logs.read,
                 wants="`resourceLogs` holding `gen_ai.client.inference.operation.details` events"),
)})
"""The readers of file formats no one store owns, by name (each store's own are `tlmscore.stores`')."""


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
