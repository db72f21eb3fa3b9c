"""`details` has one type in every file format (JSON text, keys sorted) and one in Python (a dict), and a row
read back from any format equals the row the run made."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tlmscore
from tests.support.paths import FIXTURES
from tlmscore import Row, Settings
from tlmscore.output import read_rows


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Row]]:
    """The demo scored once into each format, and the rows the run handed over."""
    demo_path = FIXTURES / "demo.jsonl"
    folder = tmp_path_factory.mktemp("details")
    settings = Settings(offline=True, cache_dir=folder / "c", page_files=(demo_path.parent / "pages",),
                        progress=False)
    seen: list[Row] = []
    for suffix in (".jsonl", ".csv", ".parquet"):
        seen.clear()
        tlmscore.run([demo_path], folder / f"out{suffix}", scorer="grounding", settings=settings, on_rows=seen.extend)
    return folder, list(seen)


def raw_details(path: Path) -> list[object]:
    """The `details` cells as the file holds them, before any decoding."""
    if path.suffix == ".jsonl":
        return [json.loads(line)["details"] for line in path.read_text(encoding="utf-8").splitlines()]
    if path.suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as handle:
            return [row["details"] for row in csv.DictReader(handle)]
    table = pq.read_table(path)
    assert str(table.schema.field("details").type) == "string"
    return table.column("details").to_pylist()


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_details_is_sorted_json_text_in_every_file_and_a_dict_read_back(made: tuple[Path, list[Row]],
                                                                       suffix: str) -> None:
    folder, rows = made
    path = folder / f"out{suffix}"
    cells = raw_details(path)
    assert len(cells) == len(rows) and any(row.details for row in rows)
    for cell, row in zip(cells, rows, strict=True):
        assert isinstance(cell, str)
        assert cell == json.dumps(dict(row.details), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    back = list(read_rows(path))
    assert all(isinstance(r.details, type(rows[0].details)) for r in back)
    assert [dict(r.details) for r in back] == [dict(r.details) for r in rows]
    assert back == rows  # every column, not only details


def test_the_api_gives_details_as_a_dict(made: tuple[Path, list[Row]], demo_path: Path, tmp_path: Path) -> None:
    settings = Settings(offline=True, cache_dir=tmp_path / "c", page_files=(demo_path.parent / "pages",),
                        progress=False)
    frame = tlmscore.score(demo_path, settings=settings)
    assert all(isinstance(value, dict) for value in frame["details"])
    assert list(frame["details"]) == [dict(r.details) for r in made[1]]


def test_an_object_in_an_older_json_line_is_read_as_well(made: tuple[Path, list[Row]], tmp_path: Path) -> None:
    folder, rows = made
    older = tmp_path / "older.jsonl"
    lines = [json.loads(line) for line in (folder / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    older.write_text("".join(json.dumps({**r, "details": json.loads(r["details"])}) + "\n" for r in lines),
                     encoding="utf-8")
    assert list(read_rows(older)) == rows
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({**lines[0], "details": "[1, 2]"}) + "\n", encoding="utf-8")
    with pytest.raises(tlmscore.ConfigError, match=r"broken.jsonl:1: .*details is '\[1, 2\]', not a JSON object"):
        list(read_rows(broken))
