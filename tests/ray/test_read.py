"""The Ray engine's reader, without a cluster: each input file gives the records the single-machine reader gives."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.stores.test_readers import span_rows  # noqa: F401  (the fixture: spans the real instrumentation wrote)
from tests.support.paths import ROOT
from tlmscore import read_transcripts
from tlmscore.ingest import input_names, with_input_id
from tlmscore.ray._read import LINE_BITS, input_rows, read_input, transcript_of

FIXTURES = ROOT / "fixtures"


def _engine_transcripts(path: Path, index: int = 0) -> list:
    item = input_rows([str(path)] * (index + 1))[index]
    rows = list(read_input(item))
    assert [r["position"] for r in rows] == [(index << LINE_BITS) | r["line"] for r in rows]
    names = input_names([path])
    return [with_input_id(transcript_of(r), names) for r in rows]  # as the engine converts them


def _same(got: list, want: list) -> None:
    assert want, "nothing was read to compare with"
    assert [(t.id, t.source, t.line, t.error, t.request, t.response, t.fmt) for t in got] == [
        (t.id, t.source, t.line, t.error, t.request, t.response, t.fmt) for t in want]


def test_jsonl_gives_the_single_machine_transcripts_bad_lines_included(demo_path: Path) -> None:
    got = _engine_transcripts(demo_path, index=2)
    _same(got, list(read_transcripts(demo_path)))
    assert any(t.error and "invalid JSON" in t.error for t in got)


def test_gzipped_jsonl_and_json_files(tmp_path: Path, demo_path: Path) -> None:
    packed = tmp_path / "demo.jsonl.gz"
    packed.write_bytes(gzip.compress(demo_path.read_bytes()))
    _same(_engine_transcripts(packed), list(read_transcripts(packed)))
    assert len(list(read_transcripts(packed))) == len(list(read_transcripts(demo_path)))
    whole = tmp_path / "chain.json"
    lines = (demo_path.parent / "chain_a.jsonl").read_text(encoding="utf-8").splitlines()
    whole.write_text(json.dumps([json.loads(line) for line in lines if line.strip()]), encoding="utf-8")
    _same(_engine_transcripts(whole), list(read_transcripts(whole)))


def test_parquet_rows_with_json_text_columns_are_records(tmp_path: Path) -> None:
    lines = (ROOT / "fixtures" / "chain_a.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    table = pa.table({"id": [r.get("id") for r in records],
                      "request": [json.dumps(r["request"]) for r in records],
                      "response": [json.dumps(r["response"]) for r in records]})
    path = tmp_path / "logs.parquet"
    pq.write_table(table, path)
    got = _engine_transcripts(path)
    assert [(t.id, t.line, t.request, t.response, t.error) for t in got] == [
        (r.get("id"), n, r["request"], r["response"], None) for n, r in enumerate(records, start=1)]


def test_an_unreadable_input_is_an_error_row_not_a_failed_task(tmp_path: Path) -> None:
    missing = tmp_path / "gone.jsonl"
    rows = list(read_input(input_rows([str(missing)])[0]))
    assert len(rows) == 1
    assert rows[0]["error"] == f"{missing}: no such file"


def test_a_file_cut_short_keeps_its_rows_and_ends_with_the_single_machine_error_row(tmp_path: Path,
                                                                                     demo_path: Path) -> None:
    packed = gzip.compress(demo_path.read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    rows = list(read_input(input_rows([str(cut)])[0]))
    names = input_names([cut])
    _same([with_input_id(transcript_of(r), names) for r in rows], list(read_transcripts(cut)))
    assert "reading stopped after line" in rows[-1]["error"]
    assert len({r["position"] for r in rows}) == len(rows)


def test_a_relative_path_is_named_as_given_and_read_wherever_the_worker_runs(
        tmp_path: Path, demo_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(demo_path.parent)
    item = input_rows(["demo.jsonl"])[0]
    monkeypatch.chdir(tmp_path)  # a worker's own working directory
    got = [with_input_id(transcript_of(r), {"demo.jsonl": "demo.jsonl"}) for r in read_input(item)]
    assert {t.source for t in got} == {"demo.jsonl"}
    monkeypatch.chdir(demo_path.parent)
    _same(got, list(read_transcripts("demo.jsonl")))


def test_an_event_stream_is_one_record_per_streamed_response_as_on_one_machine() -> None:
    stream = FIXTURES / "stream.jsonl"
    got = _engine_transcripts(stream)
    _same(got, list(read_transcripts(stream)))
    assert len(got) < len(stream.read_text(encoding="utf-8").splitlines())  # events, not records


def test_a_span_export_is_read_by_its_source_reader_as_on_one_machine(
        tmp_path: Path, span_rows: list[dict[str, Any]]) -> None:  # noqa: F811  (the imported fixture)
    export = tmp_path / "spans.jsonl"
    export.write_text("".join(json.dumps(row) + "\n" for row in span_rows), encoding="utf-8")
    got = _engine_transcripts(export)
    _same(got, list(read_transcripts(export)))
    assert got and got[0].error is None and got[0].origin == "openinference"


def test_the_ray_engine_refuses_what_only_the_local_engine_runs_before_any_ray_work(tmp_path: Path) -> None:
    """`pages=` (a page source in this process) and `converters=` are the local engine's: one line, nothing made."""
    import tlmscore
    from tlmscore.errors import ConfigError
    from tlmscore.ray import Engine

    demo = FIXTURES / "demo.jsonl"
    for extra in ({"pages": tlmscore.MemoryPages()}, {"converters": {"file_search_call": lambda item, ctx: []}}):
        with pytest.raises(ConfigError, match="local engine only"):
            tlmscore.run([demo], tmp_path / "out.jsonl", settings=tlmscore.Settings(offline=True, cache_dir=tmp_path),
                         engine=Engine(), **extra)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []  # refused before the output, its manifest or a cache was made
