"""The registries of trace stores and of readers of logs: what is built in, and what plug-ins add.

`CONNECTORS` lists the built-in stores; `PLUGINS` reads the `tlmscore.connectors` entry points.
Every reader of logs is here too, as each store brings its readers (its connector's `readers`):
`READERS`, the built-in ones, and `SOURCE_PLUGINS`, the `tlmscore.sources` entry points; `find_reader`
picks a file's reader by its content (or by name). Adding a store or a format is one module and one
entry: its connector here, or a reader on its store's connector.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tlmscore._contract import scheme
from tlmscore.errors import TranscriptError
from tlmscore.plugins import Kind, named_items, plugins
from tlmscore.stores import agents, langfuse, langsmith, mlflow, otlp, phoenix
from tlmscore.stores.base import Connector
from tlmscore.stores.reading import SOURCES_GROUP, Peek, SourceReader, peek

__all__ = ["CONNECTORS", "ENTRY_POINT_GROUP", "PLUGINS", "READERS", "SOURCE_PLUGINS", "connectors", "find_reader",
           "readers"]

ENTRY_POINT_GROUP = "tlmscore.connectors"
CONNECTORS: Mapping[str, Connector] = MappingProxyType({c.name: c for c in (
    phoenix.CONNECTOR,
    otlp.CONNECTOR,
    langfuse.CONNECTOR,
    langsmith.CONNECTOR,
    mlflow.CONNECTOR,
)})
"""The built-in trace stores that take scores back, by name (the Agents SDK's exports and stored responses are
read only: their traces take no annotations)."""


PLUGINS: Kind[Connector] = Kind("connector", ENTRY_POINT_GROUP, lambda: CONNECTORS, named_items(Connector))
"""Trace stores from other packages (`tlmscore.connectors` entry points)."""


def connectors() -> Mapping[str, Connector]:
    """Every trace store: the built-in ones, then those installed packages add."""
    return MappingProxyType({**CONNECTORS, **plugins(PLUGINS)})


READERS: Mapping[str, SourceReader] = MappingProxyType({reader.name: reader for reader in (
    *phoenix.CONNECTOR.readers, *otlp.CONNECTOR.readers, *langfuse.CONNECTOR.readers, *langsmith.CONNECTOR.readers,
    agents.READER, *mlflow.CONNECTOR.readers)})
"""The built-in readers, by name, in the stores' order: a file's reader is the first that recognises it."""


SOURCE_PLUGINS: Kind[SourceReader] = Kind("source", SOURCES_GROUP, lambda: READERS, named_items(SourceReader))
"""Source readers from other packages (`tlmscore.sources` entry points)."""


def readers() -> Mapping[str, SourceReader]:
    """Every reader: the built-in ones first, then those of plug-in stores and `tlmscore.sources` entry points.

    A plug-in never replaces a built-in reader.
    """
    added = {reader.name: reader for name, c in connectors().items() if name not in CONNECTORS
             for reader in c.readers if reader.name not in READERS}
    return MappingProxyType({**READERS, **added, **plugins(SOURCE_PLUGINS)})


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
    found = scheme(address)
    if found is not None:
        for reader in table.values():
            if found in reader.schemes:
                return reader
        raise TranscriptError(f"{address}: no reader for {found}:// addresses")
    sample = peek(address)
    if sample is None:
        return None
    for reader in table.values():
        if not reader.schemes and reader.detect(sample):
            return reader
    if sample.kind in _TABLES:
        raise TranscriptError(unmatched(address, sample, table))
    return None


_TABLES = {"parquet": "a Parquet table", "csv": "a CSV table"}
"""Kinds of file that hold no transcript records of their own: one no reader recognises is an error."""


def unmatched(address: str, sample: Peek, table: Mapping[str, SourceReader]) -> str:
    """One line: the table's columns match no reader; what each reader looks for."""
    columns = list(sample.first)
    shown = ", ".join(columns[:8]) + (f", … ({len(columns)} columns)" if len(columns) > 8 else "")  # noqa: PLR2004
    wants = "; ".join(f"{r.name}: {r.wants or 'its own rows'}" for r in table.values() if not r.schemes)
    return (f"{address}: {_TABLES[sample.kind]} whose columns ({shown}) match no reader; the readers look for "
            f"{wants} (or name one with --format)")
