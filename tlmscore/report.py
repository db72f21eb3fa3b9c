"""Report: rows to files (JSONL, CSV, Parquet), written chunk by chunk as the batch goes.

pyarrow is imported only when a Parquet file is written or read, so a run writing JSONL does not
pay for it at start-up.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import math
import os
import shutil
import statistics
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

import orjson

from tlmscore.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

__all__ = ["FORMATS", "Checkpoint", "ChunkWriter", "RowWriter", "Summary", "arrow_table", "checkpoint_path",
           "json_line", "output_format"]

FORMATS = (".jsonl", ".csv", ".parquet")
_ERRORS_SHOWN = 10
_LOWEST_SHOWN = 5
_INTEGERS = ("line", "n_tool_calls", "n_urls", "n_urls_ok", "n_urls_failed")
_DICTIONARY = ["source", "model", "scorer"]
"""Columns with few distinct values; dictionary-encoding the long text columns only costs time."""
_PART_GLOB = "part-*.parquet"


def output_format(path: Path) -> str:
    """The output format named by `path`'s suffix, or a `ConfigError` listing the choices."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f"{path}: output must end in one of {', '.join(FORMATS)}")
    return suffix


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinity inside it replaced by None, as orjson writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _to_json(value: Any, option: int) -> bytes:
    """`value` as JSON (UTF-8, Unicode kept, keys as strings, NaN and infinities as null).

    orjson encodes the long prompt strings several times faster than the standard library; a
    value it refuses (an integer wider than 64 bits) goes through `json` instead.
    """
    try:
        return orjson.dumps(value, default=str, option=option | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        text = json.dumps(_finite(value), ensure_ascii=False, default=str, allow_nan=False)
        return (text + "\n" if option & orjson.OPT_APPEND_NEWLINE else text).encode("utf-8")


def json_line(row: dict[str, Any]) -> bytes:
    """One row as a line of JSON, newline included."""
    return _to_json(row, orjson.OPT_APPEND_NEWLINE)


def _cell(value: Any) -> Any:
    """A value as one CSV or Parquet text cell: lists and dicts as JSON with sorted keys."""
    if isinstance(value, (list, dict)):
        return _to_json(value, orjson.OPT_SORT_KEYS).decode("utf-8")
    return _json_safe(value)


def _parquet_options() -> dict[str, Any]:
    """How Parquet files are written.

    Prompts of one batch repeat the same pages. zstd at level 3 (Arrow's default is 1), over a
    table in one piece (see `arrow_table`), finds those repeats: on the benchmark's 500 rows the
    file is 2.5 MB at level 1 and 0.28 MB this way, and writing it takes 8 ms instead of 18.
    """
    return {"compression": "zstd", "compression_level": 3, "use_dictionary": _DICTIONARY}


def _arrow_type(name: str) -> pa.DataType:
    import pyarrow as pa  # noqa: PLC0415

    if name in _INTEGERS:
        return pa.int64()
    special = {"warnings": pa.list_(pa.string()), "score": pa.float64(), "history_complete": pa.bool_(),
               "calibrated_score": pa.float64()}
    return special.get(name, pa.string())


def arrow_table(rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> pa.Table:
    """Rows as an Arrow table: the contract's types, any other value as a string (JSON for lists and dicts).

    Without `schema`, the columns are the keys of the first row. The rows go through pyarrow's
    JSON reader: parsing in C++ is faster than building arrays from Python objects, and it does
    not import pandas (which `pyarrow.array` does on first use, a third of a second).
    """
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.json as pj  # noqa: PLC0415

    if schema is None:
        schema = pa.schema([(name, _arrow_type(name)) for name in rows[0]])
    strings = {f.name for f in schema if f.type == pa.string()}
    lines = [
        json_line({name: _cell(row.get(name)) if name in strings and not isinstance(row.get(name), str)
                   else row.get(name) for name in schema.names})
        for row in rows
    ]
    longest = max((len(line) for line in lines), default=0)
    table = pj.read_json(
        io.BytesIO(b"".join(lines)),
        read_options=pj.ReadOptions(block_size=max(1 << 20, longest + 2)),  # a row never spans two blocks
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    )
    # One piece, not one per block: Parquet then compresses a column across all its rows, where
    # the repeats are, rather than a block at a time.
    return table.combine_chunks()


class RowWriter:
    """Writes rows to one file in the format its suffix names; call `write` per chunk, then `close`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.format = output_format(path)
        self.rows = 0
        self._handle: IO[str] | None = None
        self._binary: IO[bytes] | None = None
        self._csv: Any = None
        self._parquet: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append rows to the file."""
        if not rows:
            return
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
        self._csv.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
        handle.flush()

    def _write_parquet(self, rows: list[dict[str, Any]]) -> None:
        import pyarrow.parquet as pq  # noqa: PLC0415  (see the module docstring)

        table = arrow_table(rows, self._schema)
        if self._parquet is None:
            self._schema = table.schema
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._parquet = pq.ParquetWriter(str(self.path), table.schema, **_parquet_options())
        self._parquet.write_table(table)

    def close(self) -> None:
        """Finish the file; an empty run still leaves a valid empty file."""
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
            threading.Thread(target=_load_pyarrow, name="tlmscore-pyarrow", daemon=True).start()

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
        """Read the rows written so far; a last line cut off by a kill is dropped."""
        kept: list[str] = []
        with self.path.open(encoding="utf-8") as handle:
            for line in handle:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    break
                self.done.add((str(row["source"]), int(row["line"])))
                kept.append(line if line.endswith("\n") else line + "\n")
        self.path.write_text("".join(kept), encoding="utf-8")

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
            pq.write_table(arrow_table(rows), handle, **_parquet_options())
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(final)

    def finish(self, chunk_size: int = 1000) -> int:
        """Write the output file from the checkpoint; returns the row count."""
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
        with RowWriter(self.output) as writer, self.path.open(encoding="utf-8") as handle:
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
            with pq.ParquetWriter(str(self.output), schema, **_parquet_options()) as writer:
                for part in parts:
                    writer.write_table(_conform(pq.read_table(part), schema))
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


def _load_pyarrow() -> None:
    import pyarrow.json  # noqa: PLC0415
    import pyarrow.parquet  # noqa: PLC0415, F401


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with `schema`'s columns in its order; a column it lacks is all nulls."""
    import pyarrow as pa  # noqa: PLC0415

    columns = [table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
               for f in schema]
    return pa.table(columns, schema=schema)


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
        return "\n".join(lines)
