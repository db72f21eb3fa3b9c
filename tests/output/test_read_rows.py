"""`read_rows`: every output format read back gives the rows that were written; what is not a row is named."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import tlmscore
from tlmscore import Settings
from tlmscore.errors import ConfigError
from tlmscore.output import Row, read_rows


def _settings(tmp_path: Path, demo_path: Path) -> Settings:
    return Settings(offline=True, cache_dir=tmp_path / "c", page_files=(demo_path.parent / "pages",), progress=False)


def _same(a: Row, b: Row) -> bool:
    """Equal rows, NaN scores counting as equal."""
    left, right = a.to_record(), b.to_record()
    for record in (left, right):
        for name in ("score", "calibrated_score"):
            if isinstance(record.get(name), float) and math.isnan(record[name]):
                record[name] = "nan"
    return left == right


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_every_format_reads_back_as_the_rows_that_were_written(tmp_path: Path, demo_path: Path, suffix: str) -> None:
    seen: list[Row] = []
    out = tmp_path / f"scores{suffix}"
    tlmscore.run([demo_path], out, scorer="grounding", settings=_settings(tmp_path, demo_path), on_rows=seen.extend)
    back = list(read_rows(out))
    assert len(back) == len(seen) == 17
    assert all(isinstance(row, Row) for row in back)
    different = [a.id for a, b in zip(seen, back, strict=True) if not _same(a, b)]
    assert different == []
    assert any(row.warnings for row in back) and any(row.details for row in back)
    assert any(row.error for row in back) and any(not math.isnan(row.score) for row in back)


def test_a_json_array_of_rows_reads_too(tmp_path: Path, demo_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    tlmscore.run([demo_path], out, settings=_settings(tmp_path, demo_path))
    array = tmp_path / "rows.json"
    array.write_text(json.dumps([json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]))
    assert [r.to_record() for r in read_rows(array)] == [r.to_record() for r in read_rows(out)]


def test_columns_limits_what_is_read_and_keeps_the_identity(tmp_path: Path, demo_path: Path) -> None:
    out = tmp_path / "rows.parquet"
    tlmscore.run([demo_path], out, settings=_settings(tmp_path, demo_path))
    rows = list(read_rows(out, columns=("n_urls",)))
    assert rows[0].prompt is None and rows[0].source.endswith("demo.jsonl") and rows[0].line == 1
    assert sum(r.n_urls for r in rows) == sum(r.n_urls for r in read_rows(out))


@pytest.mark.parametrize(("text", "said"), [
    ('{"id": "a", "source": "s", "line": 1}\n{"id": "cut', ":2: not a row: invalid JSON"),
    ('{"id": "a", "source": "s", "line": 1}\n[1, 2]\n', ":2: not a row: row must be a JSON object"),
    ('{"id": "a", "source": "s"}\n', ":1: not a row of tlmscore's output: no line"),
    ('{"id": "a", "source": "s", "line": "x"}\n', ":1: not a row of tlmscore's output"),
])
def test_what_is_not_a_row_is_named_by_file_and_line(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        list(read_rows(path))
    assert str(caught.value).startswith(f"{path}{said}")


def test_a_csv_cell_of_a_count_that_is_no_number_is_named(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("id,source,line,n_urls\na,s,1,many\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"rows\.csv:1: not a row of tlmscore's output"):
        list(read_rows(path))


def test_a_file_of_another_kind_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rows.txt"
    path.write_text("hello\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="expected an output ending in"):
        list(read_rows(path))
    with pytest.raises(ConfigError, match="no such file"):
        list(read_rows(tmp_path / "missing.jsonl"))


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_score_written_without_a_scorer_column_is_kept(tmp_path: Path, suffix: str) -> None:
    """A scored table from elsewhere (a notebook, a spreadsheet) may lack `scorer`: its scores still count."""
    path = tmp_path / f"other{suffix}"
    if suffix == ".jsonl":
        path.write_text(json.dumps({"id": "a", "source": "log.jsonl", "line": 1, "score": 0.25}) + "\n" +
                        json.dumps({"id": "b", "source": "log.jsonl", "line": 2}) + "\n", encoding="utf-8")
    else:
        path.write_text("id,source,line,score\na,log.jsonl,1,0.25\nb,log.jsonl,2,\n", encoding="utf-8")
    first, second = read_rows(path)
    assert first.scored and first.to_record()["score"] == 0.25
    assert not second.scored and "score" not in second.to_record()
