"""`Row`, the final row, and `RowSink`s: the same records and bytes as the dicts, frozen, plug-in sinks."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import math
import pickle
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.support.dists import install
from tlmscore import Row, RowSink, Settings
from tlmscore.output import JsonlSink, ParquetSink, RowWriter, open_sink, output_format, sinks
from tlmscore.plugins import forget

PLUGIN = '''
import json


class Tsv:
    def __init__(self, path, columns):
        self.path, self.columns, self.lines = path, list(columns), []

    def write(self, rows):
        for row in rows:
            record = row.to_record()
            self.columns = self.columns or list(record)
            self.lines.append("\\t".join(json.dumps(record[name]) for name in self.columns))

    def close(self):
        self.path.write_text("\\n".join(["\\t".join(self.columns), *self.lines]) + "\\n", encoding="utf-8")
'''


def settings(tmp_path: Path, demo_path: Path, **extra: Any) -> Settings:
    return Settings(offline=True, cache_dir=tmp_path / "c", page_files=(demo_path.parent / "pages",),
                    progress=False, **extra)


@pytest.fixture
def scored(tmp_path: Path, demo_path: Path) -> list[Row]:
    seen: list[Row] = []
    tlmscore.run([demo_path], scorer="grounding", settings=settings(tmp_path, demo_path), on_rows=seen.extend)
    return seen


def test_run_hands_out_frozen_rows_whose_records_are_the_written_lines(tmp_path: Path, demo_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    seen: list[Row] = []
    tlmscore.run([demo_path], out, scorer="grounding", settings=settings(tmp_path, demo_path), on_rows=seen.extend)
    assert seen and all(isinstance(row, Row) for row in seen)
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [list(row.to_record()) for row in seen] == [list(line) for line in written]
    assert list(seen[0].to_record()) == list(Row.columns(scored=True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen[0].score = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        seen[0]["score"] = 1.0  # type: ignore[index]


def test_a_record_read_back_makes_the_same_bytes(tmp_path: Path, demo_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    tlmscore.run([demo_path], out, scorer="grounding", settings=settings(tmp_path, demo_path))
    again = tmp_path / "again.jsonl"
    sink = open_sink(again)
    sink.write([Row.from_record(json.loads(line)) for line in out.read_text(encoding="utf-8").splitlines()])
    sink.close()
    assert again.read_bytes() == out.read_bytes()


def test_a_row_reads_like_the_dict_it_was_made_from(scored: list[Row]) -> None:
    row = next(r for r in scored if r.n_urls and not math.isnan(r.score))
    record = row.to_record()
    assert dict(row) == record and row == record
    assert row["score"] == row.score and row.get("calibrated_score") is None and "calibrated_score" not in row
    assert isinstance(row.warnings, tuple) and isinstance(record["warnings"], list)
    record["warnings"].append("changed")  # the record is a copy: the row stays as it was
    record["details"]["added"] = 1
    assert "changed" not in row.warnings and "added" not in row.details
    assert len(row) == len(Row.columns(scored=True)) and row.scored


def test_a_row_pickles_and_copies_as_itself(scored: list[Row]) -> None:
    row = next(r for r in scored if r.details and not math.isnan(r.score))
    for again in (pickle.loads(pickle.dumps(row)), copy.deepcopy(row), dataclasses.replace(row)):  # noqa: S301
        assert isinstance(again, Row) and again.to_record() == row.to_record()


def test_columns_prepared_scored_and_calibrated() -> None:
    assert Row.columns() == tlmscore.pipeline.ROW_COLUMNS
    assert Row.columns(scored=True)[-4:] == ("scorer", "score", "explanation", "details")
    assert Row.columns(scored=True, calibrated=True)[-1] == "calibrated_score"
    prepared = Row(id="a", source="f.jsonl", line=1)
    assert list(prepared) == list(Row.columns()) and not prepared.scored and "score" not in prepared
    with pytest.raises(KeyError):
        prepared["score"]


def test_nan_scores_and_unknown_columns_survive_a_round_trip() -> None:
    record = {**Row(id="a", source="s", line=3, scorer="x").to_record(), "calibrated_score": None, "team": "blue"}
    row = Row.from_record(record)
    assert math.isnan(row.score) and math.isnan(row.calibrated_score or 0.0)
    assert list(row.to_record()) == list(record) and row["team"] == "blue" and row.extra == {"team": "blue"}


def test_aiter_rows_hands_out_rows(tmp_path: Path, demo_path: Path) -> None:
    async def collect() -> list[Row]:
        return [row async for row in tlmscore.aiter_rows([demo_path], settings(tmp_path, demo_path))]

    rows = asyncio.run(collect())
    assert rows and all(isinstance(r, Row) and not r.scored for r in rows)


def test_the_file_sinks_are_row_sinks_and_write_what_the_writer_writes(scored: list[Row], tmp_path: Path) -> None:
    for suffix in (".jsonl", ".csv", ".parquet"):
        sink = open_sink(tmp_path / f"rows{suffix}")
        assert isinstance(sink, RowSink)
        sink.write(scored)
        sink.close()
        sink.close()
        with RowWriter(tmp_path / f"plain{suffix}") as writer:
            writer.write([row.to_record() for row in scored])
        if suffix != ".parquet":  # Parquet files carry no timestamps, but compare their tables anyway
            assert (tmp_path / f"rows{suffix}").read_bytes() == (tmp_path / f"plain{suffix}").read_bytes()
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "rows.parquet").equals(pq.read_table(tmp_path / "plain.parquet"))
    forced = ParquetSink(tmp_path / "named.jsonl")  # the class names the format, not the suffix
    forced.write(scored[:2])
    forced.close()
    assert pq.read_table(tmp_path / "named.jsonl").num_rows == 2
    assert JsonlSink.format == ".jsonl"


@pytest.fixture
def tsv_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An installed distribution declaring a `.tsv` sink in the `tlmscore.sinks` group."""
    root = install(tmp_path / "site", "acme_tsv", PLUGIN, "[tlmscore.sinks]\ntsv = acme_tsv:Tsv\n")
    monkeypatch.syspath_prepend(str(root))
    forget()  # entry points are read once per process: read them again with this one installed
    yield
    forget()


def test_without_a_plugin_an_unknown_suffix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(tlmscore.ConfigError, match=r"one of \.jsonl, \.csv, \.parquet$"):
        output_format(tmp_path / "rows.tsv")


def test_a_sink_from_an_entry_point_writes_a_run(tsv_plugin: None, tmp_path: Path, demo_path: Path) -> None:
    assert list(sinks()) == [".jsonl", ".csv", ".parquet", ".tsv"]
    out = tmp_path / "rows.tsv"
    result = tlmscore.run([demo_path], out, scorer="grounding", settings=settings(tmp_path, demo_path))
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == list(Row.columns(scored=True))
    assert len(lines) == 1 + result.total == 1 + 17
    assert not list(tmp_path.glob("rows.tsv.partial*"))


def test_a_broken_sink_plugin_is_skipped_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "site"
    info = root / "broken-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[tlmscore.sinks]\nbad = no_such_module:Sink\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    forget()
    with pytest.warns(UserWarning, match="sink plug-in 'bad'"):
        known: Sequence[str] = list(sinks())
    forget()
    assert ".bad" not in known and ".jsonl" in known
