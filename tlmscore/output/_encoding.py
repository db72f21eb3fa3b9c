"""Encoding rows: as JSON lines, as CSV or Parquet cells, as Arrow tables; the output formats by suffix.

Pure functions of the rows (no file is opened here); `tlmscore.output._writers` writes what they give.
pyarrow is imported only when an Arrow table is made. In every format a dict column (`details`) is one
JSON text, keys sorted: a Parquet struct cannot hold details that differ from scorer to scorer, and
one type in every file is what a reader of several can count on (`read_rows` gives the dict back).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tlmscore.errors import ConfigError
from tlmscore.ingest import safe_text
from tlmscore.output._row import column_kind

if TYPE_CHECKING:
    import pyarrow as pa


FORMATS = (".jsonl", ".csv", ".parquet")
_DICTIONARY = ["source", "model", "scorer"]
"""Columns with few distinct values; dictionary-encoding the long text columns only costs time."""


def builtin_format(path: Path) -> str:
    """The built-in file format (`FORMATS`) named by `path`'s suffix, or a `ConfigError` listing them.

    What `RowWriter` writes; `output_format` (in `_sinks`) also admits the suffixes of plug-in sinks.
    """
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f"{path}: output must end in one of {', '.join(FORMATS)}")
    return suffix


def _finite(value: Any) -> Any:
    """`value` as orjson writes it: NaN and infinities as None, lone surrogates replaced (see `safe_text`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(str(k)): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _to_json(value: Any, option: int) -> bytes:
    """`value` as JSON (UTF-8, Unicode kept, keys as strings, NaN and infinities as null).

    orjson encodes the long prompt strings several times faster than the standard library; a
    value it refuses (an integer wider than 64 bits, a lone surrogate) goes through `json` instead.
    """
    try:
        return orjson.dumps(value, default=str, option=option | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        text = json.dumps(_finite(value), ensure_ascii=False, default=str, allow_nan=False)
        return (text + "\n" if option & orjson.OPT_APPEND_NEWLINE else text).encode("utf-8")


def json_line(row: dict[str, Any]) -> bytes:
    """One row as a line of JSON, newline included; a dict column (`details`) as JSON text, as in every file."""
    return _to_json({name: cell(value) if isinstance(value, dict) and column_kind(name) == "dict" else value
                     for name, value in row.items()}, orjson.OPT_APPEND_NEWLINE)


def cell(value: Any) -> Any:
    """A value as one CSV or Parquet text cell: lists and dicts as JSON with sorted keys."""
    if isinstance(value, (list, dict)):
        return _to_json(value, orjson.OPT_SORT_KEYS).decode("utf-8")
    if isinstance(value, str):
        return safe_text(value)
    return None if isinstance(value, float) and math.isnan(value) else value


def _text_cell(value: Any) -> str | None:
    """A value of a text column as text: a number or a boolean (a numeric response id) as its JSON."""
    text = cell(value)
    return text if text is None or isinstance(text, str) else _to_json(text, 0).decode("utf-8")


def parquet_options() -> dict[str, Any]:
    """How Parquet files are written.

    Prompts of one batch repeat the same pages. zstd at level 3 (Arrow's default is 1), over a
    table in one piece (see `arrow_table`), finds those repeats: the file is several times smaller
    and faster to write (docs/benchmarks.md has the figures).
    """
    return {"compression": "zstd", "compression_level": 3, "use_dictionary": _DICTIONARY}


def arrow_schema(names: list[str]) -> pa.Schema:
    """The Arrow schema of rows with these columns: each by its kind (`COLUMN_KINDS`), text for the others.

    A dict (`details`) is JSON text, as any other value.
    """
    import pyarrow as pa  # noqa: PLC0415

    types = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "list": pa.list_(pa.string())}
    return pa.schema([(name, types.get(column_kind(name), pa.string())) for name in names])


def arrow_table(rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> pa.Table:
    """Rows as an Arrow table: the contract's types, any other value as a string (JSON for lists and dicts).

    Without `schema`, the columns are the keys of the first row. The rows go through pyarrow's
    JSON reader: parsing in C++ is faster than building arrays from Python objects, and it does
    not import pandas (which `pyarrow.array` does on first use, a third of a second).
    """
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.json as pj  # noqa: PLC0415

    if schema is None:
        schema = arrow_schema(list(rows[0]))
    strings = {f.name for f in schema if f.type == pa.string()}
    lines = [
        json_line({name: _text_cell(row.get(name)) if name in strings and not isinstance(row.get(name), str)
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


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with `schema`'s columns in its order; a column it lacks is all nulls."""
    import pyarrow as pa  # noqa: PLC0415

    columns = [table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
               for f in schema]
    return pa.table(columns, schema=schema)
