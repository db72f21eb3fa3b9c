"""The source registry: a file's reader is chosen by its content, `--format` forces one, and every
record keeps where it came from (`origin`, `trace_id`, `span_id`)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.servers.openai_server import OpenAIServer
from tests.support.paths import ROOT
from tests.support.tables import write_table
from tlmscore import read_transcripts
from tlmscore.errors import TranscriptError
from tlmscore.stores import READERS as REGISTRY
from tlmscore.stores import SOURCE_PLUGINS as PLUGINS
from tlmscore.stores import Read, SourceReader, find_reader

pytest.importorskip("openinference.instrumentation.openai", reason="the phoenix extra is not installed")

RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "m-1",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Paris.", "annotations": []}]}],
            "tools": [], "parallel_tool_calls": True, "tool_choice": "auto"}
REQUEST = {"model": "answer", "input": "Capital of France?", "instructions": "Answer briefly."}


@pytest.fixture(scope="module")
def span_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Rows as a Phoenix export holds them, of spans the real OpenAI instrumentation wrote for one call."""
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    folder = tmp_path_factory.mktemp("responses")
    (folder / "answer.json").write_text(json.dumps(RESPONSE), encoding="utf-8")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with OpenAIServer(folder) as fake:
            openai.OpenAI(base_url=fake.url, api_key="sk-fake", max_retries=0).responses.create(**REQUEST)
    finally:
        instrumentor.uninstrument()
    return [{"name": s.name, "span_kind": s.attributes.get("openinference.span.kind"), "parent_id": None,
             "context.span_id": f"{s.context.span_id:016x}", "context.trace_id": f"{s.context.trace_id:032x}",
             **{f"attributes.{k}": v for k, v in s.attributes.items() if not k.startswith("llm.")}}
            for s in exporter.get_finished_spans()]


def _settings(tmp_path: Path, **values: Any) -> tlmscore.Settings:
    return tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache", **values)


def test_a_span_file_is_read_by_content_whatever_its_name(span_rows: list[dict[str, Any]], tmp_path: Path) -> None:
    raw = tlmscore.prepare([{"request": REQUEST, "response": RESPONSE}], _settings(tmp_path))
    for name in ("spans.jsonl", "export.ndjson"):
        rows = tlmscore.prepare(write_table(tmp_path / name, span_rows), _settings(tmp_path))
        assert list(rows["prompt"]) == list(raw["prompt"])
        assert list(rows["response"]) == list(raw["response"])
        assert rows["origin"][0] == "openinference"
        assert rows["span_id"][0] == span_rows[0]["context.span_id"]
        assert rows["trace_id"][0] == span_rows[0]["context.trace_id"]
    array = tmp_path / "spans.json"
    array.write_text(json.dumps(span_rows), encoding="utf-8")
    assert find_reader(str(array)) is REGISTRY["openinference"]


def test_other_spans_of_a_trace_are_no_records(span_rows: list[dict[str, Any]], tmp_path: Path) -> None:
    tool = {**span_rows[0], "span_kind": "TOOL", "attributes.openinference.span.kind": "TOOL",
            "context.span_id": "00000000000000aa"}
    rows = tlmscore.prepare(write_table(tmp_path / "spans.jsonl", [tool, *span_rows, tool]), _settings(tmp_path))
    assert list(rows["line"]) == [2]


def test_a_record_file_stays_a_record_file(tmp_path: Path) -> None:
    path = write_table(tmp_path / "calls.jsonl", [{"request": REQUEST, "response": RESPONSE}])
    assert find_reader(str(path)) is None
    rows = tlmscore.prepare(path, _settings(tmp_path))
    assert rows["origin"][0] is None and rows["error"][0] is None


def test_origin_fields_of_a_plain_record_reach_the_row(tmp_path: Path) -> None:
    record = {"request": REQUEST, "response": RESPONSE, "origin": "my-store", "trace_id": "t1", "span_id": "s1",
              "warnings": ["the store cut the reasoning"]}
    rows = tlmscore.prepare([record], _settings(tmp_path))
    assert (rows["origin"][0], rows["trace_id"][0], rows["span_id"][0]) == ("my-store", "t1", "s1")
    assert rows["warnings"][0][0] == "the store cut the reasoning"


def test_format_forces_a_reader(span_rows: list[dict[str, Any]], tmp_path: Path) -> None:
    path = write_table(tmp_path / "spans.jsonl", span_rows)
    as_records = tlmscore.prepare(path, _settings(tmp_path, input_format="records"))
    assert list(as_records["error"]) == [f"{path}:1: response has no 'output'"]
    forced = list(read_transcripts(path, fmt="openinference"))
    assert forced[0].origin == "openinference"
    with pytest.raises(TranscriptError, match="unknown input format 'nope'"):
        list(read_transcripts(path, fmt="nope"))


def test_an_unknown_scheme_is_an_unreadable_input(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="no reader for ftp:// addresses"):
        list(read_transcripts("ftp://example.invalid/x"))


def test_a_plugin_loads_readers_and_refuses_other_values() -> None:
    def read(address: str) -> Iterator[Read]:
        yield Read(1, {"response": RESPONSE})

    reader = SourceReader("mine", lambda peek: False, read)
    other = SourceReader("yours", lambda peek: False, read)
    assert PLUGINS.accept("x", reader) == {"mine": reader}
    assert PLUGINS.accept("x", [reader, other]) == {"mine": reader, "yours": other}
    with pytest.raises(TypeError, match="not a SourceReader: int"):
        PLUGINS.accept("x", [reader, 3])


def test_window_flags_without_a_live_source_are_a_usage_error(tmp_path: Path) -> None:
    path = write_table(tmp_path / "calls.jsonl", [{"request": REQUEST, "response": RESPONSE}])
    done = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", str(path), "--limit", "3",
                           "-o", str(tmp_path / "out.jsonl"), "--quiet"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=False, timeout=120)
    assert done.returncode == 2
    assert "--since, --until and --limit apply to a live source" in done.stderr
