"""The checkpoint: rows saved as chunks complete, so a killed run loses at most one chunk; `--resume` reads it."""

from __future__ import annotations

import bisect
import itertools
import os
import shutil
import sys
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from tlmscore.output import _encoding as encoding
from tlmscore.output._read import read_rows
from tlmscore.output._row import Row
from tlmscore.output._sinks import open_sink
from tlmscore.output._writers import RowWriter

_PART_GLOB = "part-*.parquet"
_APPENDED = (".jsonl", ".csv")
"""The formats a checkpoint is written in as the output itself, appended to chunk by chunk."""


@dataclass(frozen=True)
class Done(Container[tuple[str, int]]):
    """The records an earlier run saved, `(source, line)`: what a resumed run skips.

    Held as runs of consecutive lines per source (a run saves records in input order, so a
    source's lines make few runs), small enough to hand to every worker of a cluster.
    """

    runs: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, keys: Iterable[tuple[str, int]]) -> Done:
        """The records `keys` name."""
        lines: dict[str, list[int]] = {}
        for source, line in keys:
            lines.setdefault(source, []).append(line)
        return cls({source: _runs(sorted(found)) for source, found in lines.items()})

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:  # noqa: PLR2004  (a (source, line) pair)
            return False
        runs = self.runs.get(key[0], ())
        at = bisect.bisect_right(runs, (key[1], sys.maxsize)) - 1
        return at >= 0 and runs[at][0] <= key[1] <= runs[at][1]

    def __len__(self) -> int:
        return sum(last - first + 1 for runs in self.runs.values() for first, last in runs)


def _runs(lines: list[int]) -> tuple[tuple[int, int], ...]:
    """Sorted line numbers as `(first, last)` runs of consecutive lines."""
    runs: list[tuple[int, int]] = []
    for line in lines:
        if runs and line <= runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], max(runs[-1][1], line))
        else:
            runs.append((line, line))
    return tuple(runs)


def checkpoint_path(output: Path) -> Path:
    """Where rows go while a run is in progress: a file in the output's format, Parquet's part files, or JSONL."""
    suffix = output.suffix.lower()
    if suffix == ".parquet":
        return output.with_name(output.name + ".partial")
    return output.with_name(output.name + ".partial" + (suffix if suffix in _APPENDED else ".jsonl"))


class Checkpoint:
    """Rows saved (and synced) as chunks complete, so a killed run loses at most one chunk.

    A JSONL or CSV output is its checkpoint, appended chunk by chunk by `RowWriter` (each row is
    encoded and written once) and renamed at the end. A Parquet file cannot be appended to (its
    footer is written last), so every chunk is one complete part file and finishing is a rename (or
    a merge of parts, no re-encoding of rows). A plug-in sink may not be able to append either:
    its rows wait in a JSONL file and go through the sink at the end. `done` holds the
    `(source, line)` of every row saved by an earlier run; `finish` writes the output and removes
    the checkpoint. Resuming a finished run keeps all its rows.
    """

    def __init__(self, output: Path, *, resume: bool) -> None:
        self.output = output
        self.path = checkpoint_path(output)
        self.done: set[tuple[str, int]] = set()
        self._parts = self.path.suffix == ".partial"
        self._writer: RowWriter | None = None
        self._written = 0
        if not resume:
            self._remove()
            return
        if not self.path.exists() and output.exists():
            self._adopt_output()
        if self.path.exists():
            self._load()

    def _remove(self) -> None:
        if self.path.is_dir():
            shutil.rmtree(self.path)
        elif self.path.exists():
            self.path.unlink()

    def _adopt_output(self) -> None:
        """Take a finished output back as the checkpoint, so `--resume` on it redoes nothing."""
        if self._parts:
            self.path.mkdir(parents=True)
            self.output.replace(self.path / "part-000000.parquet")
        elif self.output.suffix.lower() in _APPENDED:
            self.output.replace(self.path)

    def _load(self) -> None:
        """Read which records the saved rows hold, once what a kill left half-written is gone (a part, a row)."""
        if self._parts:
            for stray in self.path.glob("*.tmp"):
                stray.unlink()
        else:
            self._mend()
        self.done.update((row.source, row.line) for row in self._rows(columns=()))

    def _mend(self) -> None:
        """End the file with its last whole row: a kill can cut the row being written, never one before it.

        A JSON line ends at a newline (it holds none of its own); a CSV row at a CRLF outside quotes
        (the writer quotes every cell that holds a line break or a quote, doubling its quotes). What
        follows the last whole row is a JSON line written whole but for its newline (kept, the newline
        added), or a cut row (dropped, by truncating the file: one system call, which a kill cannot halve).
        """
        csv = self.path.suffix == ".csv"
        with self.path.open("r+b") as handle:
            whole, end = _csv_end(handle) if csv else _jsonl_end(handle)
            if whole == end:
                return
            handle.seek(whole)
            if not csv and _json_object(handle.read()):
                handle.write(b"\n")
            else:
                handle.truncate(whole)
            handle.flush()
            os.fsync(handle.fileno())

    def _rows(self, columns: Sequence[str] | None = None) -> Iterator[Row]:
        files = sorted(self.path.glob(_PART_GLOB)) if self._parts else [self.path]
        return itertools.chain.from_iterable(read_rows(f, columns=columns) for f in files if f.stat().st_size)

    def saved(self) -> Iterator[Row]:
        """The rows an earlier run saved, in order, read back as a stream (before this run adds any)."""
        return itertools.islice(self._rows(), len(self.done))

    def write(self, final: Sequence[Row]) -> None:
        """Save one chunk of rows durably."""
        if not final:
            return
        rows = [row.to_record() for row in final]
        if self._parts:
            self._write_part(rows)
            return
        if self._writer is None:
            self._writer = RowWriter(self.path, append=True)
        self._writer.write(rows)
        self._writer.sync()
        self._written += len(rows)

    def _write_part(self, rows: list[dict[str, Any]]) -> None:
        """Write the rows as the next part file: complete and synced before it gets its name."""
        self.path.mkdir(parents=True, exist_ok=True)
        parts = sorted(self.path.glob(_PART_GLOB))
        number = int(parts[-1].name[5:11]) + 1 if parts else 1
        final = self.path / f"part-{number:06d}.parquet"
        temporary = final.with_suffix(".tmp")
        with RowWriter(temporary, fmt=".parquet") as writer:
            writer.write(rows)
        with temporary.open("rb") as handle:
            os.fsync(handle.fileno())
        temporary.replace(final)

    def finish(self, chunk_size: int = 1000, columns: Sequence[str] = ()) -> int:
        """Write the output file from the checkpoint; returns the row count.

        `columns` are the columns of an output that has no rows (a CSV header, a Parquet schema).
        """
        if self._parts:
            return self._finish_parts(columns)
        (self._writer or RowWriter(self.path, columns, append=True)).close()  # no rows: a valid empty file
        if self.output.suffix.lower() in _APPENDED:
            self.path.replace(self.output)
            return len(self.done) + self._written
        sink = open_sink(self.output, columns)
        count = 0
        try:
            for batch in _batches(read_rows(self.path), chunk_size):
                sink.write(batch)
                count += len(batch)
        finally:
            sink.close()
        self.path.unlink()
        return count

    def _finish_parts(self, columns: Sequence[str]) -> int:
        """The output from the parts: one as it is, several merged in order, none as `columns` without rows."""
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        parts = sorted(self.path.glob(_PART_GLOB)) if self.path.exists() else []
        self.output.parent.mkdir(parents=True, exist_ok=True)
        if not parts:
            RowWriter(self.output, columns, fmt=".parquet").close()
        elif len(parts) == 1:
            parts[0].replace(self.output)
        else:
            schema = pa.unify_schemas([pq.read_schema(p) for p in parts], promote_options="permissive")
            with pq.ParquetWriter(str(self.output), schema, **encoding.parquet_options()) as writer:
                for part in parts:
                    writer.write_table(encoding.conform(pq.read_table(part), schema))
        rows = int(pq.ParquetFile(self.output).metadata.num_rows)
        self._remove()
        return rows


def _jsonl_end(handle: IO[bytes]) -> tuple[int, int]:
    """Where the last whole JSON line ends, and where the file does: read back from the end, a block at a time."""
    end = start = handle.seek(0, os.SEEK_END)
    while start > 0:
        step = min(start, 1 << 16)
        handle.seek(start - step)
        newline = handle.read(step).rfind(b"\n")
        if newline >= 0:
            return start - step + newline + 1, end
        start -= step
    return 0, end


def _csv_end(handle: IO[bytes]) -> tuple[int, int]:
    """Where the last whole CSV row ends, and where the file does, read from the start.

    A row's CRLF may stand inside a quoted cell, so only the quotes counted from the start tell a row's end.
    """
    whole = end = quotes = 0
    for line in handle:
        end += len(line)
        quotes += line.count(b'"')
        if quotes % 2 == 0 and line.endswith(b"\r\n"):
            whole = end
    return whole, end


def _json_object(text: bytes) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def _batches(rows: Iterator[Row], size: int) -> Iterator[list[Row]]:
    while batch := list(itertools.islice(rows, size)):
        yield batch
