"""Scored output files read back as rows: JSONL, JSON, CSV or Parquet, as `prepare` and `score` write them.

Only the columns a comparison needs are normalised: `score` becomes a float (NaN when empty or
not a number), `error` a string or None. Other columns are kept as they are, so `--by` can name
any of them (or a key of a `metadata` column).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tlmscore.errors import ConfigError

SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def read_scored(path: Path) -> list[dict[str, Any]]:
    """The rows of a scored output file; a `ConfigError` names the file (and line) that cannot be read."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ConfigError(f"{path}: expected a scored output ending in {', '.join(SUFFIXES)}")
    if suffix == ".jsonl":
        rows = _jsonl(path)
    elif suffix == ".json":
        rows = _json(path)
    else:
        rows = _table(path, suffix)
    return [_normalised(row) for row in rows]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{number}: not a JSON row: {exc.msg}") from None
            if not isinstance(value, dict):
                raise ConfigError(f"{path}:{number}: not a row (a JSON object): {type(value).__name__}")
            rows.append(value)
    return rows


def _json(path: Path) -> list[dict[str, Any]]:
    try:
        value = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    values = value if isinstance(value, list) else [value]
    for index, item in enumerate(values):
        if not isinstance(item, dict):
            raise ConfigError(f"{path}: item {index} is not a row (a JSON object)")
    return values


def _table(path: Path, suffix: str) -> list[dict[str, Any]]:
    import pandas as pd  # noqa: PLC0415  (only for tables)

    try:
        frame = pd.read_csv(path, dtype={"id": str}) if suffix == ".csv" else pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return [{str(k): _cell(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _cell(value: Any) -> Any:
    """A CSV or Parquet cell as the JSON row holds it: NaN as None, JSON text of lists and dicts decoded."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _normalised(row: dict[str, Any]) -> dict[str, Any]:
    row = dict(row)
    row["score"] = score_of(row.get("score"))
    error = row.get("error")
    row["error"] = None if error is None or (isinstance(error, float) and math.isnan(error)) else str(error)
    return row


def score_of(value: Any) -> float:
    """A score cell as a float, NaN when it holds none."""
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan
