"""Files of JSON objects, numbered from 1: JSON lines (plain or gzip), a JSON array, Parquet or CSV.

The one reader of these four formats: span and observation exports (`tlmscore.sources`), scored
outputs read back as rows (`tlmscore.output.read_rows`) and label tables all walk a file with `rows`,
streamed, one flat dict per row (a Parquet file a batch at a time), cells as JSON values (`plain`).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

KINDS = ("jsonl", "json", "parquet", "csv")
"""The kinds of table file `rows` reads (`table_kind` also names `protobuf`, which is no table)."""
_BATCH = 512  # Parquet rows decoded at a time: memory stays bounded by a batch, not the file
_PARQUET_MAGIC = b"PAR1"


def _open(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]  # GzipFile is a binary IO
    return path.open("rb")


def table_kind(path: Path) -> str | None:
    """The kind of a file by its name (a `.gz` suffix looked through), or Parquet by its magic bytes."""
    named = Path(path.stem) if path.suffix.lower() == ".gz" else path
    kinds = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet", ".pq": "parquet",
             ".csv": "csv", ".pb": "protobuf", ".binpb": "protobuf"}
    return kinds.get(named.suffix.lower()) or _parquet_by_magic(path)


def _parquet_by_magic(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            return "parquet" if handle.read(4) == _PARQUET_MAGIC else None
    except OSError:
        return None


def json_cell(value: Any) -> Any:
    """A cell that holds JSON text, parsed; anything else (text that is not JSON too) as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def plain(value: Any) -> Any:
    """A cell as a JSON value: timestamps as ISO text, NaN as None, arrays as lists."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return plain(tolist())
    isoformat = getattr(value, "isoformat", None)  # dates and times, pandas timestamps too
    if callable(isoformat):
        return isoformat()
    return value


def _jsonl(path: Path, columns: Sequence[str] | None = None) -> Iterator[tuple[int, Any]]:
    with _open(path) as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield number, orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                yield number, ValueError(f"invalid JSON: {exc}")


def _json(path: Path, columns: Sequence[str] | None = None) -> Iterator[tuple[int, Any]]:
    """A JSON array or object; JSON lines when the file is named `.json` but holds one value a line."""
    with _open(path) as handle:
        text = handle.read().decode("utf-8-sig")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise
        yield from _jsonl(path)
        return
    items = data if isinstance(data, list) else [data]
    yield from enumerate(items, start=1)


def _parquet(path: Path, columns: Sequence[str] | None = None) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq  # noqa: PLC0415  (pyarrow loads only for a Parquet input)

    number = 0
    with pq.ParquetFile(path) as table:
        there = None if columns is None else [c for c in columns if c in table.schema_arrow.names]
        for batch in table.iter_batches(batch_size=_BATCH, columns=there):
            for row in batch.to_pylist():
                number += 1
                yield number, row


def _csv(path: Path, columns: Sequence[str] | None = None) -> Iterator[tuple[int, Any]]:
    import pandas as pd  # noqa: PLC0415  (pandas reads CSV cells of any size, a chunk at a time)

    number = 0
    with pd.read_csv(path, chunksize=_BATCH, dtype=object, keep_default_na=False) as chunks:
        for chunk in chunks:
            for row in chunk.to_dict(orient="records"):
                number += 1
                yield number, {str(k): (v if v != "" else None) for k, v in row.items()}


_READERS: dict[str, Callable[[Path, Sequence[str] | None], Iterator[tuple[int, Any]]]] = {
    "jsonl": _jsonl, "json": _json, "parquet": _parquet, "csv": _csv}


def rows(path: Path, kind: str, *, columns: Sequence[str] | None = None) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """`(number, row)` of every row of a table file, or `(number, message)` for a row that is not an object.

    `columns` keeps only those cells of each row (a Parquet file reads only those columns).
    """
    keep = None if columns is None else frozenset(columns)
    for number, row in _READERS[kind](path, columns):
        if isinstance(row, Exception):
            yield number, str(row)
        elif not isinstance(row, dict):
            yield number, f"row must be a JSON object, not {type(row).__name__}"
        else:
            yield number, {str(k): plain(v) for k, v in row.items() if keep is None or k in keep}
