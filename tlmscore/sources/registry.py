"""The source registry: one reader per kind of log, chosen by what a file holds (or by name).

A reader turns a file (or a live address) into transcript records, the dicts of the record
contract (`{"id", "request", "response", "metadata"}` plus the origin fields `origin`,
`trace_id`, `span_id` and, where something was lost on the way, `warnings`), which ingest
normalises as it does any record.

The built-in readers (`REGISTRY`) are those of file formats no one store owns (`GENERIC`:
OpenInference span exports, OTLP traces), then each trace store's own (`tlmscore.stores`: live
servers, the stores' exports); other packages add readers through the `tlmscore.sources`
entry-point group (an entry point loads a `SourceReader` or a sequence of them; one named as a
built-in is refused, see `tlmscore.plugins`). The stores read through this package, so their
readers join `REGISTRY` when it is first asked for.
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from tlmscore.errors import TranscriptError
from tlmscore.plugins import Kind, plugins
from tlmscore.sources import _openinference, _otlp
from tlmscore.sources._tables import Peek, Read, peek

__all__ = ["ENTRY_POINT_GROUP", "GENERIC", "PLUGINS", "REGISTRY", "Peek", "Read", "SourceReader", "builtin_readers",
           "find_reader", "is_live", "plugin_readers", "readers", "with_window"]

ENTRY_POINT_GROUP = "tlmscore.sources"


@dataclass(frozen=True)
class SourceReader:
    """A kind of log: `detect(peek)` says whether a file is one; `read(address)` yields its records.

    `schemes` are the URL schemes of a live source (`phoenix`), read from the address itself.
    """

    name: str
    detect: Callable[[Peek], bool]
    read: Callable[[str], Iterator[Read]]
    schemes: tuple[str, ...] = ()


GENERIC: Mapping[str, SourceReader] = MappingProxyType({r.name: r for r in (
    SourceReader("openinference", _openinference.detect, _openinference.read),
    SourceReader("otlp", _otlp.detect, _otlp.read),
)})
"""The readers of file formats no one store owns, by name (each store's own are `tlmscore.stores`')."""

if TYPE_CHECKING:
    REGISTRY: Mapping[str, SourceReader]
    """The built-in readers, by name: `GENERIC`, then the built-in trace stores'."""


def __getattr__(name: str) -> object:
    """`REGISTRY`, made when first asked for (the stores' modules read through this one)."""
    if name == "REGISTRY":
        return builtin_readers()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _stores_readers(plugin: bool) -> dict[str, SourceReader]:
    """The readers of the built-in trace stores, or of those plug-ins add (a reader each store brings)."""
    from tlmscore.stores import CONNECTORS, connectors  # noqa: PLC0415  (stores read through this module)

    chosen = [c for name, c in connectors().items() if (name not in CONNECTORS) == plugin]
    return {reader.name: reader for connector in chosen for reader in connector.readers}


@functools.cache
def builtin_readers() -> Mapping[str, SourceReader]:
    """The built-in readers (`REGISTRY`): `GENERIC`, then the built-in trace stores'."""
    return MappingProxyType({**GENERIC, **_stores_readers(plugin=False)})


def _accept(name: str, value: Any) -> Mapping[str, SourceReader]:
    """The readers an entry point loaded: one `SourceReader` or a sequence of them."""
    items = list(value) if isinstance(value, Sequence) else [value]
    wrong = [type(item).__name__ for item in items if not isinstance(item, SourceReader)]
    if wrong:
        raise TypeError(f"not a SourceReader: {', '.join(wrong)}")
    return {item.name: item for item in items if isinstance(item, SourceReader)}


PLUGINS: Kind[SourceReader] = Kind("source", ENTRY_POINT_GROUP, builtin_readers, _accept)
"""Source readers from other packages (`tlmscore.sources` entry points)."""


def plugin_readers() -> Mapping[str, SourceReader]:
    """The readers installed packages add: through `tlmscore.sources`, and those of plug-in trace stores."""
    builtin = builtin_readers()
    extra = {name: r for name, r in _stores_readers(plugin=True).items() if name not in builtin}
    return MappingProxyType({**extra, **plugins(PLUGINS)})


def readers() -> Mapping[str, SourceReader]:
    """Every reader: the built-in ones first, then installed plug-ins (which never replace a built-in)."""
    return MappingProxyType({**builtin_readers(), **plugin_readers()})


def _scheme(address: str) -> str | None:
    scheme, sep, _ = address.partition("://")
    return scheme.lower() if sep and scheme.isalnum() else None


def find_reader(address: str, fmt: str | None = None) -> SourceReader | None:
    """The reader of `address`; None for a plain transcript-record file.

    That is the reader named `fmt`, else the live source of the address's URL scheme, else the
    first that recognises the file's content. Raises `TranscriptError` for an unknown `fmt` or URL scheme.
    """
    table = readers()
    if fmt is not None:
        if fmt in ("records", "auto"):
            return None
        if fmt not in table:
            raise TranscriptError(f"unknown input format {fmt!r} (known: records, {', '.join(sorted(table))})")
        return table[fmt]
    scheme = _scheme(address)
    if scheme is not None:
        for reader in table.values():
            if scheme in reader.schemes:
                return reader
        raise TranscriptError(f"{address}: no reader for {scheme}:// addresses")
    sample = peek(address)
    if sample is None:
        return None
    for reader in table.values():
        if not reader.schemes and reader.detect(sample):
            return reader
    return None


def is_live(address: str) -> bool:
    """Whether `address` is a live source's URL (`phoenix://…`, `mlflow://…`) rather than a file."""
    return _scheme(address) is not None


def with_window(address: str, since: str | None, until: str | None, limit: int | None) -> str:
    """A live source's address with the command line's window and cap in its query (values given only)."""
    given = {k: str(v) for k, v in (("since", since), ("until", until), ("limit", limit)) if v is not None}
    if not given:
        return address
    url = urllib.parse.urlsplit(address)
    query = dict(urllib.parse.parse_qsl(url.query)) | given
    return urllib.parse.urlunsplit(url._replace(query=urllib.parse.urlencode(query)))
