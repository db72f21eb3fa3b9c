"""Spans and log events of `opentelemetry-instrumentation-genai-openai` 1.3b0, read back as their raw records.

`fixtures/traces/genai-openai/` holds what `python -m tests.servers.genai_openai_calls --fixtures` recorded
(with a Python that has the instrumentation): the project's Responses records sent through the
official `openai` client to a local fake of the API, once per way the instrumentation keeps content
(`span_only`, `event_only`, `span_and_event`, and the completion hook's `upload`), exported over
OTLP/HTTP and written as the Collector's file exporter writes spans (`traces.jsonl`) and logs
(`logs.jsonl`); the hook's files are in `upload/uploads/`. `calls.jsonl` is what was sent.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.servers.genai_openai_calls import ANSWER_LOST, BUILT_IN, lost_in_genai_span
from tests.support.paths import ROOT

pytest.importorskip("opentelemetry.proto", reason="the otel extra (opentelemetry-proto) is not installed")

FOLDER = ROOT / "fixtures" / "traces" / "genai-openai"
MODES = ("span_only", "event_only", "span_and_event", "upload")
FAILED = 2
"""Calls the instrumentation itself broke (it raises on xAI's items the SDK does not know): error rows."""
_BASE64 = re.compile(r"[A-Za-z0-9+/]{120,}={0,2}")


def _settings() -> tlmscore.Settings:
    return tlmscore.Settings(offline=True)


def _records(frame: Any) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def _rows(path: Path | str) -> list[dict[str, Any]]:
    return _records(tlmscore.prepare(path, _settings()))


@cache
def _calls() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FOLDER / "calls.jsonl").read_text(encoding="utf-8").splitlines()]


@cache
def _raw() -> dict[str, dict[str, Any]]:
    return {row["response_id"]: row for row in _rows_of_calls()}


def _rows_of_calls() -> list[dict[str, Any]]:
    return _records(tlmscore.prepare(_calls(), _settings()))


@cache
def _read(mode: str) -> dict[str, dict[str, Any]]:
    """The rows of a mode's spans file (its logs and uploads found beside it), by response id."""
    rows = _rows(FOLDER / mode / "traces.jsonl")
    return {row["response_id"]: row for row in rows}


def _spans(path: Path) -> list[dict[str, Any]]:
    return [span for line in path.read_text(encoding="utf-8").splitlines()
            for resource in json.loads(line)["resourceSpans"] for scope in resource["scopeSpans"]
            for span in scope["spans"]]


def test_the_recordings_hold_every_built_in_tool_kind_as_server_tool_parts() -> None:
    sent = {item["type"] for call in _calls() for item in call["response"].get("output") or []}
    assert sent >= BUILT_IN  # web search, file search, code interpreter, image generation, MCP, tool search
    text = (FOLDER / "span_only" / "traces.jsonl").read_text(encoding="utf-8")
    for name in ("web_search", "file_search", "code_interpreter", "image_generation", "mcp", "mcp_list_tools",
                 "tool_search"):
        assert f'\\"type\\":\\"{name}\\"' in text, name  # a payload of that tool, as the instrumentation wrote it
    assert '\\"type\\":\\"server_tool_call_response\\"' in text


@pytest.mark.parametrize("mode", MODES)
def test_every_span_is_one_row_and_only_the_calls_the_instrumentation_broke_are_errors(mode: str) -> None:
    spans = _spans(FOLDER / mode / "traces.jsonl")
    rows = _rows(FOLDER / mode / "traces.jsonl")
    assert len(rows) == len(spans) == len(_calls()) + FAILED
    assert sorted(r["span_id"] for r in rows) == sorted(s["spanId"] for s in spans)
    failed = [r for r in rows if r["error"]]
    assert len(failed) == FAILED and all("the call failed: 'NoneType' object is not iterable" in r["error"]
                                         for r in failed)
    assert {r["response_id"] for r in rows if not r["error"]} == {c["response"]["id"] for c in _calls()}
    assert {r["origin"] for r in rows} == {"otlp"}


@pytest.mark.parametrize("mode", MODES)
def test_the_response_is_the_raw_records_wherever_the_span_holds_the_answer(mode: str) -> None:
    rows, raw = _read(mode), _raw()
    held = [c["response"]["id"] for c in _calls() if lost_in_genai_span(c) not in ANSWER_LOST]
    assert len(held) >= 60
    for rid in held:
        assert rows[rid]["response"] == raw[rid]["response"], rid


@pytest.mark.parametrize("mode", MODES)
def test_plain_calls_prompts_are_the_raw_records(mode: str) -> None:
    """A plain call (nothing the span cannot hold, `lost_in_genai_span`): its prompt is the raw record's."""
    rows, raw = _read(mode), _raw()
    plain = [c["response"]["id"] for c in _calls() if lost_in_genai_span(c) is None]
    equal = [rid for rid in plain if rows[rid]["prompt"] == raw[rid]["prompt"]]
    assert len(plain) >= 35 and len(equal) / len(plain) >= 0.95, sorted(set(plain) - set(equal))


@pytest.mark.parametrize("mode", MODES)
def test_no_built_in_call_is_the_answers_own_and_no_bytes_are_pasted(mode: str) -> None:
    built_in = ("web_search", "file_search", "code_interpreter", "image_generation", "mcp_list_tools", "tool_search")
    for row in _read(mode).values():
        answer = row["response"] or ""
        assert not any(f'"name": "{name}' in answer for name in built_in), row["response_id"]
        for text in (row["prompt"] or "", answer):
            assert ";base64," not in text and not _BASE64.search(text), row["response_id"]
    images = [c["response"]["id"] for c in _calls()
              if any(i["type"] == "image_generation_call" for i in c["response"]["output"])]
    assert images and any("[image: image/png, " in _read(mode)[rid]["prompt"] for rid in images)  # not its bytes


def test_each_mode_reads_as_the_spans_that_hold_the_content() -> None:
    spans = _read("span_only")
    for mode in ("event_only", "span_and_event", "upload"):
        rows = _read(mode)
        for rid, row in spans.items():
            assert (rows[rid]["prompt"], rows[rid]["response"], rows[rid]["warnings"]) == \
                (row["prompt"], row["response"], row["warnings"]), (mode, rid)


def test_a_namespaced_call_keeps_its_namespace_and_a_json_answer_is_a_structured_output() -> None:
    rows, raw = _read("span_only"), _raw()
    namespaced = next(c["response"]["id"] for c in _calls()
                      if any(i.get("namespace") == "crm" for i in c["response"]["output"]))
    assert '"name": "crm.search"' in rows[namespaced]["response"]
    assert rows[namespaced]["response"] == raw[namespaced]["response"]
    structured = [c["response"]["id"] for c in _calls() if (c["request"].get("text") or {}).get("format")]
    assert len(structured) >= 3
    for rid in structured:  # the answer as the raw record shows it; a refusal stays a refusal
        assert rows[rid]["response"] == raw[rid]["response"], rid
        assert any("keeps no schema" in w for w in rows[rid]["warnings"])
    assert any('"name": "structured_output"' in rows[rid]["response"] for rid in structured)
    assert any("structured_output" not in rows[rid]["response"] for rid in structured)  # the refusal


def test_spans_without_their_logs_hold_only_the_response_ids(tmp_path: Path) -> None:
    shutil.copy(FOLDER / "event_only" / "traces.jsonl", tmp_path / "traces.jsonl")
    rows = _rows(tmp_path / "traces.jsonl")
    assert rows and all(r["prompt"] is None and r["error"] for r in rows)
    responses = sum(1 for c in _calls() if c["response"]["id"].startswith("resp_"))
    assert sum("holds only the response id" in r["error"] for r in rows) == responses >= 60
    xai = [r["error"] for r in rows if "holds only" not in r["error"] and "failed" not in r["error"]]
    assert xai and all("logs.jsonl beside traces.jsonl" in e for e in xai)  # not a Responses id: says where to look


def _by_id(rows: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {r["response_id"]: (r["span_id"], r["prompt"], r["response"]) for r in rows if not r["error"]}


def test_log_events_in_the_spans_file_itself_are_joined_too(tmp_path: Path) -> None:
    folder = FOLDER / "event_only"
    mixed = tmp_path / "otel.jsonl"  # one file exporter in both pipelines: spans and logs lines in one file
    mixed.write_text((folder / "traces.jsonl").read_text("utf-8") + (folder / "logs.jsonl").read_text("utf-8"),
                     encoding="utf-8")
    assert _by_id(_rows(mixed)) == _by_id(list(_read("event_only").values()))


def test_a_logs_file_alone_gives_each_event_as_its_spans_call() -> None:
    rows = _rows(FOLDER / "event_only" / "logs.jsonl")
    assert len(rows) == len(_calls()) + FAILED  # an event has no status: the broken calls' rows hold their input
    spans = _by_id(list(_read("span_only").values()))
    logged = {rid: v for rid, v in _by_id(rows).items() if rid in spans}
    assert {rid: v[1:] for rid, v in logged.items()} == {rid: v[1:] for rid, v in spans.items()}
    assert {v[0] for v in logged.values()} == {v[0] for v in _by_id(list(_read("event_only").values())).values()}


def _protobuf(line: str, kind: str) -> bytes:
    """A Collector JSON line (ids in hex) as the OTLP/HTTP protobuf body it came as."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    def ids(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId")
                    and v else ids(v) for k, v in value.items()}
        return [ids(v) for v in value] if isinstance(value, list) else value

    message = ExportLogsServiceRequest() if kind == "logs" else ExportTraceServiceRequest()
    return ParseDict(ids(json.loads(line)), message).SerializeToString()


def test_protobuf_bodies_of_spans_and_logs_are_joined(tmp_path: Path) -> None:
    folder = FOLDER / "span_and_event"
    spans = (folder / "traces.jsonl").read_text("utf-8").splitlines()
    logs = (folder / "logs.jsonl").read_text("utf-8").splitlines()
    (tmp_path / "traces.binpb").write_bytes(_protobuf(spans[0], "traces"))
    (tmp_path / "logs.binpb").write_bytes(_protobuf(logs[0], "logs"))
    joined = [r for r in _rows(tmp_path / "traces.binpb") if "the call failed" not in (r["error"] or "")]
    assert len(joined) >= 10 and all(r["error"] is None for r in joined)
    expected = _by_id(list(_read("span_only").values()))
    assert all(expected[r["response_id"]][1:] == (r["prompt"], r["response"]) for r in joined)
    only_spans = FOLDER / "event_only" / "traces.jsonl"  # spans without content, with their logs in protobuf
    (tmp_path / "spans.binpb").write_bytes(_protobuf(only_spans.read_text("utf-8").splitlines()[0], "traces"))
    event_logs = (FOLDER / "event_only" / "logs.jsonl").read_text("utf-8").splitlines()[0]
    (tmp_path / "logs.binpb").write_bytes(_protobuf(event_logs, "logs"))
    rows = [r for r in _rows(tmp_path / "spans.binpb") if "the call failed" not in (r["error"] or "")]
    assert len(rows) >= 10 and all(r["error"] is None and r["prompt"] for r in rows)
    assert all(expected[r["response_id"]][1:] == (r["prompt"], r["response"]) for r in rows)


def _moved(tmp_path: Path, scheme: str) -> Path:
    """The upload recording with every ref pointing elsewhere (`scheme`://…/uploads/NAME), its files not beside it."""
    text = (FOLDER / "upload" / "traces.jsonl").read_text("utf-8")
    text = re.sub(r'file://[^"]*/uploads/', f"{scheme}://bucket/telemetry/uploads/", text)
    (tmp_path / "traces.jsonl").write_text(text, encoding="utf-8")
    return tmp_path / "traces.jsonl"


def test_uploads_are_read_where_the_refs_point_or_beside_the_trace(tmp_path: Path) -> None:
    refs = re.findall(r'"gen_ai\.(?:input|output)\.messages_ref","value":\{"stringValue":"([^"]+)"',
                      (FOLDER / "upload" / "traces.jsonl").read_text("utf-8"))
    assert refs and all(r.startswith("file://") for r in refs)
    gone = [Path(r.removeprefix("file://")) for r in refs]  # the hook wrote to a folder since removed
    assert not any(p.exists() for p in gone) and all((FOLDER / "upload" / "uploads" / p.name).is_file() for p in gone)
    path = _moved(tmp_path, "gs")
    missing = _rows(path)
    assert all(r["prompt"] is None for r in missing)
    said = [r["error"] for r in missing if "completion hook" in (r["error"] or "")]
    assert len(said) == len(missing) == len(_calls()) + FAILED  # the broken calls' inputs were uploaded too
    assert all("fetch gs://bucket/telemetry/uploads/" in e and "_inputs.json" in e for e in said)
    shutil.copytree(FOLDER / "upload" / "uploads", tmp_path / "uploads")  # fetched beside the trace
    fetched = {rid: v[1:] for rid, v in _by_id(_rows(path)).items()}
    assert fetched == {rid: v[1:] for rid, v in _by_id(list(_read("span_only").values())).items()}


def _span_file(tmp_path: Path, refs: dict[str, str]) -> Path:
    """A trace file of one Responses span whose content the completion hook uploaded to `refs`."""
    attributes = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                  {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4.1-mini"}},
                  {"key": "gen_ai.response.id", "value": {"stringValue": "resp_up1"}},
                  *({"key": k, "value": {"stringValue": v}} for k, v in refs.items())]
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat gpt-4.1-mini", "attributes": attributes}
    scope = {"scope": {"name": "opentelemetry.instrumentation.genai.openai"}, "spans": [span]}
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [scope]}]}) + "\n", encoding="utf-8")
    return path


def test_an_upload_in_json_lines_is_read_in_its_order_and_one_elsewhere_is_named(tmp_path: Path) -> None:
    messages = [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]},
                {"role": "assistant", "parts": [{"type": "text", "content": "Hello"}]},
                {"role": "user", "parts": [{"type": "text", "content": "Bye?"}]}]
    lines = [json.dumps({**m, "index": i}) for i, m in enumerate(messages)]
    (tmp_path / "x_inputs.jsonl").write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    answer = {"role": "assistant", "parts": [{"type": "text", "content": "Goodbye."}], "index": 0}
    (tmp_path / "x_outputs.jsonl").write_text(json.dumps(answer) + "\n", encoding="utf-8")
    [row] = _rows(_span_file(tmp_path, {"gen_ai.input.messages_ref": "x_inputs.jsonl",  # relative: to the trace
                                        "gen_ai.output.messages.ref": f"file://{tmp_path}/x_outputs.jsonl"}))
    assert row["error"] is None and row["response"] == "Goodbye."
    assert row["prompt"].index("User: Hi") < row["prompt"].index("Assistant: Hello") < row["prompt"].index("Bye?")
    [row] = _rows(_span_file(tmp_path, {"gen_ai.input.messages_ref": "s3://b/up/y_inputs.json"}))
    assert "fetch s3://b/up/y_inputs.json into" in row["error"] and row["prompt"] is None


@pytest.mark.parametrize("mode", MODES)
def test_a_row_that_differs_from_its_raw_record_says_what_the_span_may_have_lost(mode: str) -> None:
    rows, raw = _read(mode), _raw()
    differ = [rid for rid in raw if (rows[rid]["prompt"], rows[rid]["response"]) != (raw[rid]["prompt"],
                                                                                       raw[rid]["response"])]
    assert len(differ) >= 20 and all(rows[rid]["warnings"] for rid in differ), [r for r in differ
                                                                                   if not rows[r]["warnings"]]


def _call_span(tmp_path: Path, tools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The row of one genai-openai span whose answer calls `name`, offering `tools` (as the span keeps them)."""
    output = [{"role": "assistant", "finish_reason": "tool_call",
               "parts": [{"type": "tool_call", "id": "call_1", "name": name, "arguments": {"q": "x"}}]}]
    inputs = [{"role": "user", "parts": [{"type": "text", "content": "Find x."}]}]
    attributes = [{"key": "gen_ai.response.id", "value": {"stringValue": "resp_ns1"}},
                  {"key": "openai.api.type", "value": {"stringValue": "responses"}},
                  {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(inputs)}},
                  {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(output)}},
                  {"key": "gen_ai.tool.definitions", "value": {"stringValue": json.dumps(tools)}}]
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat gpt-5.4", "attributes": attributes}
    scope = {"scope": {"name": "opentelemetry.instrumentation.genai.openai"}, "spans": [span]}
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [scope]}]}) + "\n", encoding="utf-8")
    [row] = _rows(path)
    return row


def test_a_call_is_named_by_its_namespace_only_where_the_span_tells_it(tmp_path: Path) -> None:
    crm = {"type": "namespace", "name": "crm"}
    row = _call_span(tmp_path, [crm], "search")
    assert '"name": "crm.search"' in row["response"]
    row = _call_span(tmp_path, [crm, {"type": "namespace", "name": "docs"}], "search")
    assert '"name": "search"' in row["response"]
    assert any("without a namespace, and it declares several" in w for w in row["warnings"])
    row = _call_span(tmp_path, [crm, {"type": "function", "name": "search", "description": "d", "parameters": {}}],
                     "search")  # a function of that name declared on its own: no namespace
    assert '"name": "search"' in row["response"] and not any("namespace" in w for w in row["warnings"])
