"""Sinks: where final `Row`s go. A `RowSink` writes rows chunk by chunk and is closed once.

The built-in sinks are the three output files (JSONL, CSV, Parquet: `_writers.RowWriter` behind
them, so the bytes are those it writes). Other packages add a format through the `tlmscore.sinks`
entry-point group: the entry point's name is the file suffix without its dot (`feather`), its
value a factory `(path, columns) -> RowSink`; one named as a built-in format is refused with a
warning (`tlmscore.plugins`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from tlmscore.errors import ConfigError
from tlmscore.output._encoding import FORMATS
from tlmscore.output._row import Row
from tlmscore.output._writers import RowWriter
from tlmscore.plugins import Kind, factories, plugins

ENTRY_POINT_GROUP = "tlmscore.sinks"


@runtime_checkable
class RowSink(Protocol):
    """Takes final rows, a chunk at a time, in input order; `close` finishes what it writes."""

    def write(self, rows: Sequence[Row]) -> None:
        """Take one chunk of rows."""
        ...

    def close(self) -> None:
        """Finish (a file gets its footer, an empty run a valid empty file); closing again does nothing."""
        ...


SinkFactory = Callable[[Path, Sequence[str]], RowSink]
"""Makes a sink writing to a path; `columns` are the run's columns (a CSV header when no row comes)."""


class FileSink:
    """Rows to one file in the format this class names, whatever the path's suffix."""

    format = ".jsonl"

    def __init__(self, path: Path, columns: Sequence[str] = ()) -> None:
        self.path = path
        self._writer = RowWriter(path, columns, fmt=self.format)

    def write(self, rows: Sequence[Row]) -> None:
        """Append the rows' records to the file."""
        self._writer.write([row.to_record() for row in rows])

    def close(self) -> None:
        """Finish the file."""
        self._writer.close()

    def __enter__(self) -> FileSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JsonlSink(FileSink):
    """One JSON object per line."""

    format = ".jsonl"


class CsvSink(FileSink):
    """A CSV table; lists and dicts as JSON text cells."""

    format = ".csv"


class ParquetSink(FileSink):
    """A Parquet file (zstd), typed columns (see `tlmscore.output._encoding.arrow_table`)."""

    format = ".parquet"


SINKS: Mapping[str, SinkFactory] = MappingProxyType({".jsonl": JsonlSink, ".csv": CsvSink, ".parquet": ParquetSink})
"""The built-in sinks by file suffix."""


PLUGINS: Kind[SinkFactory] = Kind("sink", ENTRY_POINT_GROUP, lambda: SINKS,
                                  factories("(path, columns) -> RowSink", lambda name: "." + name.lower().lstrip(".")))
"""Output formats from other packages (`tlmscore.sinks` entry points), each under its entry point's file suffix."""


def sinks() -> Mapping[str, SinkFactory]:
    """Every sink by file suffix: the built-in ones, then installed plug-ins (a built-in suffix stays built-in)."""
    return MappingProxyType({**SINKS, **plugins(PLUGINS)})


def output_format(path: Path) -> str:
    """The output format named by `path`'s suffix, or a `ConfigError` listing the choices."""
    suffix = path.suffix.lower()
    if suffix in FORMATS:
        return suffix
    known = sinks()
    if suffix not in known:
        raise ConfigError(f"{path}: output must end in one of {', '.join(known)}")
    return suffix


def open_sink(path: Path, columns: Sequence[str] = ()) -> RowSink:
    """The sink writing to `path`, chosen by its suffix."""
    return sinks()[output_format(path)](path, columns)
