"""The source registry: one reader per kind of log, chosen by what a file holds (or by name).

A reader turns a file (or a live address) into transcript records, the dicts of the record
contract (`{"id", "request", "response", "metadata"}` plus the origin fields `origin`,
`trace_id`, `span_id` and, where something was lost on the way, `warnings`), which ingest
normalises as it does any record. Other packages add readers through the `tlmscore.sources`
entry-point group: an entry point loads a `SourceReader` (or a sequence of them).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import MappingProxyType

from tlmscore.errors import TranscriptError
from tlmscore.sources import _agents, _langfuse, _langsmith, _openinference, _otlp, _phoenix
from tlmscore.sources._tables import Peek, Read, peek

__all__ = ["ENTRY_POINT_GROUP", "REGISTRY", "Peek", "Read", "SourceReader", "find_reader", "is_live",
           "plugin_readers", "readers"]

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


def _builtin() -> tuple[SourceReader, ...]:
    return (
        SourceReader("openinference", _openinference.detect, _openinference.read),
        SourceReader("otlp", _otlp.detect, _otlp.read),
        SourceReader("langfuse", _langfuse.detect, _langfuse.read),
        SourceReader("langsmith", _langsmith.detect, _langsmith.read),
        SourceReader("agents", _agents.detect, _agents.read),
        SourceReader("phoenix", lambda _: False, _phoenix.read_live, schemes=("phoenix", "phoenixs")),
    )


REGISTRY: Mapping[str, SourceReader] = MappingProxyType({r.name: r for r in _builtin()})
"""The built-in readers, by name."""


def _loaded(value: object) -> list[SourceReader]:
    """The readers an entry point loaded: one `SourceReader` or a sequence of them."""
    items = list(value) if isinstance(value, Sequence) else [value]
    wrong = [type(item).__name__ for item in items if not isinstance(item, SourceReader)]
    if wrong:
        raise TypeError(f"not a SourceReader: {', '.join(wrong)}")
    return [item for item in items if isinstance(item, SourceReader)]


@functools.cache
def plugin_readers() -> Mapping[str, SourceReader]:
    """The readers installed packages declare in the `tlmscore.sources` entry-point group (read once)."""
    found: dict[str, SourceReader] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        try:
            found.update((reader.name, reader) for reader in _loaded(ep.load()))
        except Exception as exc:  # noqa: BLE001  (a broken plug-in must not stop reading)
            warnings.warn(f"tlmscore: source plug-in {ep.name!r} ({ep.value}) skipped: "
                          f"{type(exc).__name__}: {exc}", stacklevel=2)
    return MappingProxyType(found)


def readers() -> Mapping[str, SourceReader]:
    """Every reader: the built-in ones, then installed plug-ins (which win on a shared name)."""
    return MappingProxyType({**REGISTRY, **plugin_readers()})


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
    """Whether `address` is a live source's URL (`phoenix://…`) rather than a file."""
    return _scheme(address) is not None
