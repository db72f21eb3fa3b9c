"""Report: rows to files (JSONL, CSV, Parquet), written chunk by chunk as the batch goes."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from tlmscore.errors import ConfigError

__all__ = ["FORMATS", "RowWriter", "output_format"]

FORMATS = (".jsonl", ".csv", ".parquet")
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
