"""Report: rows to files (JSONL, CSV, Parquet), written chunk by chunk as the batch goes."""

from __future__ import annotations

import csv
import heapq
import json
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from tlmscore.errors import ConfigError

__all__ = ["FORMATS", "Checkpoint", "RowWriter", "Summary", "checkpoint_path", "output_format"]

FORMATS = (".jsonl", ".csv", ".parquet")
_ERRORS_SHOWN = 10
_LOWEST_SHOWN = 5
_TYPES: dict[str, pa.DataType] = {
    "line": pa.int64(), "n_tool_calls": pa.int64(), "n_urls": pa.int64(), "n_urls_ok": pa.int64(),
    "n_urls_failed": pa.int64(), "warnings": pa.list_(pa.string()), "score": pa.float64(),
    "history_complete": pa.bool_(),
}


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


def _cell(value: Any) -> Any:
    """A value as one CSV cell: lists and dicts as JSON."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _json_safe(value)


class RowWriter:
    """Writes rows to one file in the format its suffix names; call `write` per chunk, then `close`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.format = output_format(path)
        self.rows = 0
        self._handle: IO[str] | None = None
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

    def _write_jsonl(self, rows: list[dict[str, Any]]) -> None:
        handle = self._text()
        for row in rows:
            handle.write(json.dumps({k: _json_safe(v) for k, v in row.items()}, ensure_ascii=False,
                                    default=str) + "\n")
        handle.flush()

    def _write_csv(self, rows: list[dict[str, Any]]) -> None:
        handle = self._text()
        if self._csv is None:
            self._csv = csv.DictWriter(handle, fieldnames=list(rows[0].keys()), extrasaction="ignore")
            self._csv.writeheader()
        self._csv.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
        handle.flush()

    def _schema_for(self, row: dict[str, Any]) -> pa.Schema:
        return pa.schema([(name, _TYPES.get(name, pa.string())) for name in row])

    def _write_parquet(self, rows: list[dict[str, Any]]) -> None:
        if self._schema is None:
            self._schema = self._schema_for(rows[0])
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._parquet = pq.ParquetWriter(str(self.path), self._schema)
        columns: dict[str, list[Any]] = {}
        for name in self._schema.names:
            strings = self._schema.field(name).type == pa.string()
            values = [row.get(name) for row in rows]
            columns[name] = [_cell(v) if strings and not isinstance(v, str) and v is not None else v
                             for v in values]
        assert self._parquet is not None  # noqa: S101  (set together with the schema above)
        self._parquet.write_table(pa.table(columns, schema=self._schema))

    def close(self) -> None:
        """Finish the file; an empty run still leaves a valid empty file."""
        if self.format == ".parquet" and self._parquet is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({}), str(self.path))
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        if self.format != ".parquet" and self._handle is None:
            self._text()
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def checkpoint_path(output: Path) -> Path:
    """The sidecar file rows go to while a run is in progress."""
    return output.with_name(output.name + ".partial.jsonl")


class Checkpoint:
    """Rows appended (and flushed) as chunks complete, so a killed run loses at most one chunk.

    `done` holds the `(source, line)` of every row already written; `finish` writes the output in
    its format and removes the sidecar.
    """

    def __init__(self, output: Path, *, resume: bool) -> None:
        self.output = output
        self.path = checkpoint_path(output)
        self.done: set[tuple[str, int]] = set()
        if resume and not self.path.exists() and output.suffix == ".jsonl" and output.exists():
            output.replace(self.path)
        if resume and self.path.exists():
            self._load()
        elif self.path.exists():
            self.path.unlink()
        self._handle: IO[str] | None = None

    def _load(self) -> None:
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

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append rows and flush them to disk."""
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = self.path.open("a", encoding="utf-8")
        for row in rows:
            self._handle.write(json.dumps({k: _json_safe(v) for k, v in row.items()}, ensure_ascii=False,
                                          default=str) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def finish(self, chunk_size: int = 1000) -> int:
        """Write the output file from the checkpoint, chunk by chunk; returns the row count."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if not self.path.exists():
            self.path.write_text("", encoding="utf-8")
        if self.output.suffix == ".jsonl":
            rows = sum(1 for _ in self.path.open(encoding="utf-8"))
            self.path.replace(self.output)
            return rows
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
