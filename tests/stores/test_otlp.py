"""OTLP traces with OpenTelemetry GenAI spans: Collector file-exporter JSON lines and OTLP/HTTP bodies.

Spans are made with the OpenTelemetry SDK, their attributes as the GenAI semantic conventions
define them, and encoded by the SDK's own OTLP encoder, so the files are what an exporter writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.servers.openai_server import OpenAIServer
from tlmscore import read_transcripts
from tlmscore.stores import READERS as REGISTRY
from tlmscore.stores import find_reader

pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder",
                    reason="the OTLP exporter that encodes the spans is not installed: pip install -e '.[dev]'")

SYSTEM = [{"type": "text", "content": "Answer briefly."}]
TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
INPUT = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
         {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather",
                                          "arguments": {"city": "Paris"}}]},
         {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "result": "18 C, sunny"}]}]
OUTPUT = [{"role": "assistant", "parts": [{"type": "text", "content": "It is 18 C and sunny."}],
           "finish_reason": "stop"}]
RAW = {"request": {"model": "gpt-test", "instructions": "Answer briefly.",
                   "input": [{"role": "user", "content": "Weather in Paris?"},
                             {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                              "arguments": json.dumps({"city": "Paris"}, sort_keys=True)},
                             {"type": "function_call_output", "call_id": "call_1", "output": "18 C, sunny"}],
                   "tools": [{"type": "function", "name": "get_weather", "description": "Weather of a city",
                              "parameters": TOOLS[0]["parameters"]}]},
       "response": {"id": "resp_9", "object": "response", "model": "gpt-test", "status": "completed",
                    "output": [{"type": "message", "role": "assistant", "status": "completed",
                                "content": [{"type": "output_text", "text": "It is 18 C and sunny.",
                                             "annotations": []}]}]}}


def _spans(structured: bool = False) -> bytes:
    """An OTLP/HTTP protobuf body of three spans: a GenAI chat, a tool span, a chat logged as events."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")

    def value(v: Any) -> str:
        return json.dumps(v)

    with tracer.start_as_current_span("chat gpt-test") as span:
        span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                             "gen_ai.request.model": "gpt-test", "gen_ai.response.id": "resp_9",
                             "gen_ai.response.finish_reasons": ["stop"],
                             "gen_ai.system_instructions": value(SYSTEM), "gen_ai.input.messages": value(INPUT),
                             "gen_ai.output.messages": value(OUTPUT), "gen_ai.tool.definitions": value(TOOLS)})
    with tracer.start_as_current_span("execute_tool get_weather") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
    with tracer.start_as_current_span("chat old") as span:
        span.set_attribute("gen_ai.request.model", "gpt-test")
        span.add_event("gen_ai.user.message", {"gen_ai.event.content": json.dumps({"content": "Hi?"})})
        span.add_event("gen_ai.choice", {"gen_ai.event.content": json.dumps(
            {"message": {"content": "Hello."}, "finish_reason": "stop"})})
    body: bytes = encode_spans(exporter.get_finished_spans()).SerializeToString()
    return body


def _as_json(body: bytes, hex_ids: bool) -> dict[str, Any]:
    """The body as OTLP/JSON: the Collector's file exporter writes ids as hex, protobuf's JSON mapping base64."""
    import base64

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest()
    message.ParseFromString(body)
    data: dict[str, Any] = MessageToDict(message)
    if hex_ids:
        for resource in data["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
    return data


def _settings(tmp_path: Path) -> tlmscore.Settings:
    return tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache")


@pytest.fixture(scope="module")
def body() -> bytes:
    return _spans()


def test_a_collector_file_reads_as_the_raw_record_does(body: bytes, tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(_as_json(body, hex_ids=True)) + "\n", encoding="utf-8")
    assert find_reader(str(path)) is REGISTRY["otlp"]
    rows = tlmscore.prepare(path, _settings(tmp_path))
    raw = tlmscore.prepare([RAW], _settings(tmp_path))
    assert len(rows) == 2  # the tool span is no record
    assert rows["error"].isna().all()
    assert rows["prompt"][0] == raw["prompt"][0]
    assert rows["response"][0] == raw["response"][0]
    assert rows["response_id"][0] == "resp_9"
    assert rows["origin"][0] == "otlp"
    assert len(rows["trace_id"][0]) == 32 and len(rows["span_id"][0]) == 16
    assert rows["response"][1] == "Hello."
    assert "Hi?" in rows["prompt"][1]


def test_a_protobuf_body_and_base64_ids_read_the_same(body: bytes, tmp_path: Path) -> None:
    pb = tmp_path / "body.pb"
    pb.write_bytes(body)
    as_json = tmp_path / "body.json"
    as_json.write_text(json.dumps(_as_json(body, hex_ids=False)), encoding="utf-8")
    hexed = tmp_path / "hex.jsonl"
    hexed.write_text(json.dumps(_as_json(body, hex_ids=True)) + "\n", encoding="utf-8")
    columns = ["prompt", "response", "trace_id", "span_id"]
    expected = tlmscore.prepare(hexed, _settings(tmp_path))[columns]
    for path in (pb, as_json):
        assert tlmscore.prepare(path, _settings(tmp_path))[columns].equals(expected)


def test_built_in_tools_are_warned_about_and_media_render_as_in_a_raw_record(tmp_path: Path) -> None:
    output = [{"role": "assistant", "parts": [
        {"type": "server_tool_call", "id": "ws_1", "name": "web_search",
         "server_tool_call": {"type": "web_search", "query": "paris weather"}},
        {"type": "server_tool_call_response", "id": "ws_1", "server_tool_call_response": {"sources": []}},
        {"type": "text", "content": "Sunny."}]}]
    inputs = [{"role": "user", "parts": [{"type": "text", "content": "See "},
                                         {"type": "uri", "modality": "image", "uri": "https://a.test/x.png"}]}]
    span = {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "2", "name": "chat", "attributes": [
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(inputs)}},
        {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(output)}}]}
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n", encoding="utf-8")
    rows = tlmscore.prepare(path, _settings(tmp_path))
    assert rows["error"][0] is None
    assert rows["response"][0].endswith("Sunny.")
    assert "User: See \n[image: https://a.test/x.png]" in rows["prompt"][0]  # parts joined as a raw record's are
    warnings = " ".join(rows["warnings"][0])
    assert "built-in tool 'web_search' is shown as a function call" in warnings
    assert "uri" not in warnings  # an image by its URL loses nothing: the raw record shows the same


def test_a_broken_line_and_a_broken_span_are_error_rows_naming_the_line(body: bytes, tmp_path: Path) -> None:
    good = json.dumps(_as_json(body, hex_ids=True))
    bad_span = {"spanId": "00000000000000ff", "attributes": [
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(["not a message"])}}]}
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join([good, "{not json", json.dumps({"resourceSpans": [{"scopeSpans": [
        {"spans": [bad_span]}]}]})]) + "\n", encoding="utf-8")
    transcripts = list(read_transcripts(path))
    assert [t.line for t in transcripts] == [1, 2, 3, 4]
    assert transcripts[2].error is not None and transcripts[2].error.startswith(f"{path}:3: line 2: invalid JSON")
    assert transcripts[3].error == (f"{path}:4: line 3: span 00000000000000ff: "
                                    "a GenAI message must be an object, not str")


def _uncaptured() -> bytes:
    """A GenAI span as an instrumentation writes it with message content capture off: ids, model, usage."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    for rid in ("resp_9", "resp_gone", "chatcmpl-1"):
        with tracer.start_as_current_span("chat gpt-test") as span:
            span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-test",
                                 "gen_ai.response.id": rid, "gen_ai.usage.input_tokens": 12})
    body: bytes = encode_spans(exporter.get_finished_spans()).SerializeToString()
    return body


def test_spans_without_captured_content_are_filled_in_by_hydrate(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(_as_json(_uncaptured(), hex_ids=True)) + "\n", encoding="utf-8")
    rows = tlmscore.prepare(path, _settings(tmp_path))
    assert len(rows) == 3
    assert all("holds only the response id" in e and "--hydrate" in e for e in rows["error"][:2])
    # a Chat Completions id cannot be pulled: the row says which setting captures the content
    assert "holds no message content" in rows["error"][2]
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in rows["error"][2]

    request = RAW["request"]
    response = {**RAW["response"], "instructions": request["instructions"], "tools": request["tools"]}
    items = [{"id": f"item_{n}", **item} for n, item in enumerate(request["input"])]
    with OpenAIServer(tmp_path, stored={"resp_9": (response, items)}) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-otlp-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        filled = tlmscore.prepare(path, _settings(tmp_path).model_copy(update={"hydrate": True}))
    raw = tlmscore.prepare([RAW], _settings(tmp_path))
    assert filled["prompt"][0] == raw["prompt"][0] and filled["response"][0] == raw["response"][0]
    assert filled["error"][0] is None and filled["response_id"][0] == "resp_9"
    assert list(filled["span_id"]) == list(rows["span_id"]) and set(filled["origin"]) == {"otlp"}
    assert filled["prompt"][1] is None and "resp_gone" in filled["error"][1]
    assert "expired or was never stored" in filled["error"][1]


def test_a_span_of_a_failed_call_is_an_error_row_not_an_empty_answer(tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("logfire.openai").start_as_current_span("Responses API with 'gpt-test'") as span:
        span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-test",
                             "gen_ai.input.messages": json.dumps(INPUT[:1])})
        span.set_status(Status(StatusCode.ERROR, "RateLimitError: too many requests"))
    path = tmp_path / "failed.binpb"
    path.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    [row] = tlmscore.prepare(path, _settings(tmp_path)).to_dict("records")
    assert row["prompt"] is None and row["error"].endswith("the call failed: RateLimitError: too many requests")
    assert row["origin"] == "otlp" and row["span_id"]
