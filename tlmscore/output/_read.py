"""Outputs read back as `Row`s: the one reader of what `prepare` and `score` write (JSONL, JSON, CSV, Parquet).

Compare, calibrate, annotate, resume and the fixtures read rows here, so a row read back is the
row that was written: each cell decoded by its column's kind (`COLUMN_KINDS`), a missing cell
given the column's default. A file that is not such an output fails with one `ConfigError` naming
the file, and the line or row where it went wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tlmscore._tables import KINDS, json_cell, rows, table_kind
from tlmscore.errors import ConfigError
from tlmscore.output._row import Row, column_kind

_IDENTITY = ("id", "source", "line")
_TYPES: dict[str, type | tuple[type, ...]] = {"int": int, "bool": bool, "list": (list, tuple), "dict": dict}


_DEFAULTS = {name: value for name, value in vars(Row("", "", 0)).items() if name not in _IDENTITY}
"""What an empty cell of each of `Row`'s columns stands for: the value of a row given none."""


def score_of(value: Any) -> float:
    """A score cell as a float, NaN when it holds none (empty, not a number, or not finite)."""
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def decode(name: str, value: Any, *, text: bool = True) -> Any:  # noqa: PLR0911  (one return per kind)
    """A cell of column `name` as the row holds it; raises `ValueError` for a cell its kind cannot take.

    `text` says the file may hold a value as text (CSV: every cell; Parquet: lists and dicts as JSON);
    JSON lines hold each value as itself, and only a missing one is filled in.
    """
    kind = column_kind(name)
    if value is None or (isinstance(value, float) and math.isnan(value) and kind != "float"):
        return _DEFAULTS.get(name)
    if kind == "float":
        return score_of(value)
    if kind == "dict" and isinstance(value, str):  # JSON text in every file format (an object in older JSON lines)
        found = json.loads(value)
        if not isinstance(found, dict):
            raise ValueError(f"{name} is {value[:40]!r}, not a JSON object")
        return found
    if not text or not isinstance(value, str):
        if kind in _TYPES and (not isinstance(value, _TYPES[kind]) or (kind == "int" and isinstance(value, bool))):
            raise ValueError(f"{name} is {value!r}, not a {kind}")
        return value
    if kind == "int":
        return int(value)
    if kind == "bool":
        return value.strip().lower() in ("true", "1")
    if kind in ("list", "dict"):
        return json.loads(value)
    if name in _DEFAULTS or name in _IDENTITY:
        return value
    return json_cell(value) if value[:1] in ("[", "{") else value  # another column: a list or dict decoded


def _row(path: Path, number: int, cells: dict[str, Any] | str, *, text: bool) -> Row:
    if isinstance(cells, str):
        raise ConfigError(f"{path}:{number}: not a row: {cells}")
    missing = [name for name in _IDENTITY if cells.get(name) is None]
    if missing:
        raise ConfigError(f"{path}:{number}: not a row of tlmscore's output: no {', '.join(missing)}")
    try:
        return Row.from_record({name: decode(name, value, text=text) for name, value in cells.items()})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}:{number}: not a row of tlmscore's output: {exc}") from None


def read_rows(path: str | Path, *, columns: Sequence[str] | None = None) -> Iterator[Row]:
    """Every row of an output file, in order, streamed; `columns` limits what is decoded (Parquet reads only those).

    `id`, `source` and `line` are always read. Raises `ConfigError` for a file that is missing, of
    another kind, or holds something that is not a row (naming the line or row).
    """
    where = Path(path)
    if not where.is_file():
        raise ConfigError(f"{where}: no such file")
    kind = table_kind(where)
    if kind not in KINDS:
        raise ConfigError(f"{where}: expected an output ending in .jsonl, .json, .csv or .parquet")
    wanted = None if columns is None else (*_IDENTITY, *(c for c in columns if c not in _IDENTITY))
    try:
        for number, cells in rows(where, kind, columns=wanted):
            yield _row(where, number, cells, text=kind in ("csv", "parquet"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: cannot read: {exc}") from None
