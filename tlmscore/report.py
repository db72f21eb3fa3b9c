"""Report: rows to files (JSONL, CSV, Parquet), written chunk by chunk as the batch goes.

How a row is encoded is `tlmscore.encoding`'s (its public names are importable from here too).
pyarrow is imported only when a Parquet file is written or read, so a run writing JSONL does not
pay for it at start-up.
"""

from __future__ import annotations

import csv
import heapq
import json
import math
import os
import shutil
import statistics
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from tlmscore import encoding
from tlmscore.encoding import FORMATS, arrow_table, json_line, output_format
from tlmscore.logfile import load_line, safe_text

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

__all__ = ["FORMATS", "Checkpoint", "ChunkWriter", "RowWriter", "Summary", "arrow_table", "checkpoint_path",
           "json_line", "output_format"]

_ERRORS_SHOWN = 10
_LOWEST_SHOWN = 5
_PART_GLOB = "part-*.parquet"


class RowWriter:
    """Writes rows to one file in the format its suffix names; call `write` per chunk, then `close`.

    `columns` heads a CSV file that gets no rows, so it still reads as a table.
    """

    def __init__(self, path: Path, columns: Sequence[str] = ()) -> None:
        self.path = path
        self.format = output_format(path)
        self.rows = 0
        self._handle: IO[str] | None = None
        self._binary: IO[bytes] | None = None
        self._csv: Any = None
        self._parquet: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None
        self._closed = False
        self._columns = tuple(columns)

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append rows to the file."""
        if not rows:
            return
        if self._closed:
            raise ValueError(f"{self.path}: the writer is closed")
        if self.format == ".jsonl":
            self._write_jsonl(rows)
        elif self.format == ".csv":
            self._write_csv(rows)
        else:
            self._write_parquet(rows)
        self.rows += len(rows)

    def _text(self) -> IO[str]:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = self.path.open("w", encoding="utf-8", newline="")
        return self._handle

    def _lines(self) -> IO[bytes]:
        if self._binary is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._binary = self.path.open("wb")
        return self._binary

    def _write_jsonl(self, rows: list[dict[str, Any]]) -> None:
        handle = self._lines()
        handle.writelines(json_line(row) for row in rows)
        handle.flush()

    def _write_csv(self, rows: list[dict[str, Any]]) -> None:
        handle = self._text()
        if self._csv is None:
            self._csv = csv.DictWriter(handle, fieldnames=list(rows[0].keys()), extrasaction="ignore")
            self._csv.writeheader()
        self._csv.writerows({k: encoding.cell(v) for k, v in row.items()} for row in rows)
        handle.flush()

    def _write_parquet(self, rows: list[dict[str, Any]]) -> None:
        import pyarrow.parquet as pq  # noqa: PLC0415  (see the module docstring)

        table = arrow_table(rows, self._schema)
        if self._parquet is None:
            self._schema = table.schema
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._parquet = pq.ParquetWriter(str(self.path), table.schema, **encoding.parquet_options())
        self._parquet.write_table(table)

    def close(self) -> None:
        """Finish the file; an empty run still leaves a valid empty file. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self.format == ".parquet" and self._parquet is None:
            import pyarrow as pa  # noqa: PLC0415
            import pyarrow.parquet as pq  # noqa: PLC0415

            self.path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({}), str(self.path))
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        if self.format == ".jsonl":
            self._lines().close()
            self._binary = None
        elif self.format == ".csv" and self._csv is None and self._columns:
            csv.writer(self._text()).writerow(self._columns)  # no rows: the header alone
        elif self.format == ".csv":
            self._text()
        if self._handle is not None:
            self._handle.close()
            self._handle = None


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
        self._preloading = False
        if not resume:
            self._remove()
            return
        if not self.path.exists() and output.exists():
            self._adopt_output()
        if self.path.exists() and self._parts:
            self._load_parts()
        elif self.path.exists():
            self._load_lines()

    def preload(self) -> None:
        """Start loading pyarrow on a thread, for a Parquet output; later calls do nothing.

        The command line calls this once the first page is in: loading pyarrow is a tenth of a
        second of work that would hold back the first requests if done at the start, and would
        add to the end if done with the last chunk.
        """
        if self._parts and not self._preloading:
            self._preloading = True
            threading.Thread(target=encoding.load_pyarrow, name="tlmscore-pyarrow", daemon=True).start()

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

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Save one chunk of rows durably."""
        if not rows:
            return
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

        `columns` heads a CSV output that has no rows.
        """
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._parts:
            return self._finish_parts()
        if not self.path.exists():
            self.path.write_text("", encoding="utf-8")
        if self.output.suffix.lower() == ".jsonl":
            self.path.replace(self.output)
            return len(self.done) + self._written
        with RowWriter(self.output, columns) as writer, self.path.open(encoding="utf-8") as handle:
            batch: list[dict[str, Any]] = []
            for line in handle:
                batch.append(json.loads(line))
                if len(batch) >= chunk_size:
                    writer.write(batch)
                    batch = []
            writer.write(batch)
            count = writer.rows
        self.path.unlink()
        return count

    def _finish_parts(self) -> int:
        """One part becomes the output as it is; several are merged part by part, in order."""
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        parts = sorted(self.path.glob(_PART_GLOB)) if self.path.exists() else []
        self.output.parent.mkdir(parents=True, exist_ok=True)
        if not parts:
            pq.write_table(pa.table({}), str(self.output))
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


class ChunkWriter:
    """Runs `write(rows)` for each chunk on a thread of its own, one chunk at a time, in order.

    The batch goes on with its next chunk (and after the last one closes its connections and
    workers) while a chunk is encoded and synced. At most one chunk waits: `submit` first waits
    for the one before. A failed write is raised by the next `submit` or on leaving the `with`
    block, which also waits for the last chunk, so nothing handed over is lost.
    """

    def __init__(self, write: Callable[[list[dict[str, Any]]], None]) -> None:
        self._write = write
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="tlmscore-writer")
        self._pending: Future[None] | None = None

    def __enter__(self) -> ChunkWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self._wait()
        finally:
            self._thread.shutdown()

    def submit(self, rows: list[dict[str, Any]]) -> None:
        """Start writing `rows` once the chunk before them is written."""
        self._wait()
        self._pending = self._thread.submit(self._write, rows)

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()


@dataclass
class Summary:
    """Running totals for the end-of-run summary, kept small however many rows pass."""

    rows: int = 0
    errors: int = 0
    warned: int = 0
    urls: int = 0
    urls_failed: int = 0
    scores: list[float] = field(default_factory=list)
    lowest: list[tuple[float, str]] = field(default_factory=list)
    first_errors: list[str] = field(default_factory=list)

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Count a chunk of rows."""
        for row in rows:
            self.rows += 1
            self.warned += bool(row.get("warnings"))
            self.urls += int(row.get("n_urls") or 0)
            self.urls_failed += int(row.get("n_urls_failed") or 0)
            if row.get("error"):
                self.errors += 1
                if len(self.first_errors) < _ERRORS_SHOWN:
                    self.first_errors.append(str(row["error"]))
            score = row.get("score")
            if isinstance(score, (int, float)) and not math.isnan(score):
                self.scores.append(float(score))
                heapq.heappush(self.lowest, (-float(score), str(row.get("id"))))
                if len(self.lowest) > _LOWEST_SHOWN:
                    heapq.heappop(self.lowest)

    def text(self, output: Path, *, scored: bool) -> str:
        """The summary printed on stderr."""
        lines = [f"tlmscore: {self.rows} records → {output}: {self.rows - self.errors} prepared, "
                 f"{self.errors} errors, {self.warned} with warnings; evidence pages: "
                 f"{self.urls - self.urls_failed} ok, {self.urls_failed} unavailable"]
        if scored:
            lines.append(f"  scored: {len(self.scores)} of {self.rows}")
            if self.scores:
                qs = statistics.quantiles(self.scores, n=4) if len(self.scores) > 1 else [self.scores[0]] * 3
                lines.append(f"  score min {min(self.scores):.3f}  q1 {qs[0]:.3f}  median {qs[1]:.3f}  "
                             f"q3 {qs[2]:.3f}  max {max(self.scores):.3f}")
                low = sorted((-s, rid) for s, rid in self.lowest)
                lines.append("  lowest: " + ", ".join(f"{rid} ({s:.3f})" for s, rid in low))
        lines += [f"  error: {e}" for e in self.first_errors]
        if self.errors > len(self.first_errors):
            lines.append(f"  … and {self.errors - len(self.first_errors)} more errors (see the 'error' column)")
        return safe_text("\n".join(lines))  # a file name need not be UTF-8; stderr may not take it
