"""Rows as the tests write and read them: JSON lines, or CSV and Parquet through `RowWriter`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tlmscore.output import RowWriter


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSON lines file, parsed."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_table(path: Path, rows: list[dict[str, Any]]) -> Path:
    """`rows` written to `path`: by `RowWriter` for `.csv` and `.parquet`; otherwise as given, a JSON object a line."""
    if path.suffix in (".csv", ".parquet"):
        with RowWriter(path) as writer:
            writer.write(rows)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
