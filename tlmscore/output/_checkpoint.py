"""The checkpoint: rows saved as chunks complete, so a killed run loses at most one chunk; `--resume` reads it."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from tlmscore.ingest import load_line
from tlmscore.output import _encoding as encoding
from tlmscore.output._encoding import arrow_table, json_line
from tlmscore.output._row import Row
from tlmscore.output._sinks import open_sink

_PART_GLOB = "part-*.parquet"


def checkpoint_path(output: Path) -> Path:
    """Where rows go while a run is in progress: a JSONL file, or for Parquet a folder of part files."""
    if output.suffix.lower() == ".parquet":
        return output.with_name(output.name + ".partial")
    return output.with_name(output.name + ".partial.jsonl")


class Checkpoint:
    """Rows saved (and synced) as chunks complete, so a killed run loses at most one chunk.

    For a Parquet output every chunk is one complete part file, so finishing is a rename (or a
    merge of parts, no re-encoding of rows); otherwise rows are appended to a JSONL file. `done`
    holds the `(source, line)` of every row saved by an earlier run; `finish` writes the output
    and removes the checkpoint. Resuming a finished run keeps all its rows.
    """

    def __init__(self, output: Path, *, resume: bool) -> None:
        self.output = output
        self.path = checkpoint_path(output)
        self.done: set[tuple[str, int]] = set()
        self._parts = self.path.suffix == ".partial"
        self._handle: IO[bytes] | None = None
        self._written = 0
        if not resume:
            self._remove()
            return
        if not self.path.exists() and output.exists():
            self._adopt_output()
        if self.path.exists() and self._parts:
            self._load_parts()
        elif self.path.exists():
            self._load_lines()

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
        elif self.output.suffix.lower() == ".jsonl":
            self.output.replace(self.path)

    def _load_lines(self) -> None:
        """Read the rows written so far; a last line cut off by a kill is dropped.

        The file is read a line at a time (only the keys of the rows are kept). When its end
        needs mending, the good part is copied to a temporary file that then replaces the
        checkpoint (synced first), so a kill during the copy leaves the old checkpoint whole.
        """
        good = 0
        mended = False
        with self.path.open("rb") as handle:
            for line in handle:
                try:
                    row = load_line(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    mended = True
                    break
                self.done.add((str(row["source"]), int(row["line"])))
                good += len(line)
                mended = mended or not line.endswith(b"\n")
        if mended:
            self._keep_first(good)

    def _keep_first(self, size: int) -> None:
        """Replace the checkpoint by its first `size` bytes, ending in a newline."""
        temporary = self.path.with_name(self.path.name + ".tmp")
        with self.path.open("rb") as source, temporary.open("wb") as kept:
            remaining = size
            last = b"\n"
            while remaining > 0 and (block := source.read(min(remaining, 1 << 20))):
                kept.write(block)
                remaining -= len(block)
                last = block[-1:]
            if last != b"\n":
                kept.write(b"\n")
            kept.flush()
            os.fsync(kept.fileno())
        temporary.replace(self.path)

    def _load_parts(self) -> None:
        """Read which records the saved parts hold; a part a kill left half-written is dropped."""
        import pyarrow.parquet as pq  # noqa: PLC0415

        for stray in self.path.glob("*.tmp"):
            stray.unlink()
        for part in sorted(self.path.glob(_PART_GLOB)):
            keys = pq.read_table(part, columns=["source", "line"])
            self.done.update(zip(keys["source"].to_pylist(), keys["line"].to_pylist(), strict=True))

    def write(self, final: Sequence[Row]) -> None:
        """Save one chunk of rows durably."""
        if not final:
            return
        rows = [row.to_record() for row in final]
        if self._parts:
            self._write_part(rows)
            return
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = self.path.open("ab")
        self._handle.writelines(json_line(row) for row in rows)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._written += len(rows)

    def _write_part(self, rows: list[dict[str, Any]]) -> None:
        """Write the rows as the next part file: complete and synced before it gets its name."""
        import pyarrow.parquet as pq  # noqa: PLC0415

        self.path.mkdir(parents=True, exist_ok=True)
        parts = sorted(self.path.glob(_PART_GLOB))
        number = int(parts[-1].name[5:11]) + 1 if parts else 1
        final = self.path / f"part-{number:06d}.parquet"
        temporary = final.with_suffix(".tmp")
        with temporary.open("wb") as handle:
            pq.write_table(arrow_table(rows), handle, **encoding.parquet_options())
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(final)

    def finish(self, chunk_size: int = 1000, columns: Sequence[str] = ()) -> int:
        """Write the output file from the checkpoint; returns the row count.

        `columns` are the columns of an output that has no rows (a CSV header, a Parquet schema).
        """
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._parts:
            return self._finish_parts(columns)
        if not self.path.exists():
            self.path.write_text("", encoding="utf-8")
        if self.output.suffix.lower() == ".jsonl":
            self.path.replace(self.output)
            return len(self.done) + self._written
        sink = open_sink(self.output, columns)
        count = 0
        try:
            with self.path.open(encoding="utf-8") as handle:
                batch: list[Row] = []
                for line in handle:
                    batch.append(Row.from_record(json.loads(line)))
                    if len(batch) >= chunk_size:
                        sink.write(batch)
                        count += len(batch)
                        batch = []
                if batch:
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
            pq.write_table(encoding.arrow_schema(list(columns)).empty_table(), str(self.output),
                           **encoding.parquet_options())
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
