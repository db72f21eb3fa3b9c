"""Recorded Responses calls replayed under the official `opentelemetry-instrumentation-genai-openai`.

`python -m tests.servers.genai_openai_calls MODE CALLS OUT` sends each raw record of CALLS (JSON lines of
`{"request", "response"}`, Responses calls only) through the official `openai` client to the local fake of
the API of `tests.servers.instrumented_calls`, under the instrumentation (1.3b0 and its
`opentelemetry-util-genai` 1.3b0, which the project's own environment cannot hold beside
`opentelemetry-instrumentation-openai-v2`: run it with a Python that has them, e.g.
`/path/to/venv/bin/python -m tests.servers.genai_openai_calls --fixtures`). MODE is how it keeps content:

- `span_only`, `event_only`, `span_and_event`: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`;
  with events, the messages go to `gen_ai.client.inference.operation.details` log records;
- `upload`: `OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=upload`, no content capture: the hook writes
  the messages to files (`OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH`: a temporary folder, whose
  files `--fixtures` then moves to `upload/uploads/`, so the span's `file://` URIs name a place that
  is gone, as when uploads are copied beside a trace) and the span names them.

Spans and log records go over OTLP/HTTP (protobuf) to a local receiver, written as the Collector's
file exporter writes them: `traces.jsonl` (`resourceSpans` lines) and `logs.jsonl` (`resourceLogs`
lines), ids in hex. OUT also gets `calls.jsonl`, the records sent, in order (`--fixtures` keeps one
copy, `fixtures/traces/genai-openai/calls.jsonl`: every mode sends the same). One process per mode,
as the instrumentation patches `openai` for the whole process and reads its settings once.
`--corpus FOLDER OUT` records the real replies of the shared corpus (`../shared/corpus/responses`)
in `span_only` into OUT, for the held-out figures of `docs/traces.md`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.servers.instrumented_calls import FIXTURES, _Fake, _hex_ids, _Receiver, _send, fixture_calls

MODES = ("span_only", "event_only", "span_and_event", "upload")
OUT = FIXTURES / "traces" / "genai-openai"


def _collector_line(path: str, body: bytes) -> str:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportLogsServiceRequest() if path.endswith("/logs") else ExportTraceServiceRequest()
    message.ParseFromString(body)
    return json.dumps(_hex_ids(MessageToDict(message)), separators=(",", ":"), ensure_ascii=False)


def _environment(mode: str, uploads: Path) -> dict[str, str]:
    env = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
           "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "" if mode == "upload" else mode.upper(),
           "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK": "upload" if mode == "upload" else "",
           "OTEL_SDK_DISABLED": "false"}
    if mode == "upload":
        env["OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH"] = str(uploads)
    return env


def record(calls: list[dict[str, Any]], out: Path) -> None:
    """Replay the Responses calls of `calls` under the instrumentation; its spans and logs go to `out`."""
    import openai
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    fake, receiver = _Fake(), _Receiver()
    tracer = TracerProvider()
    tracer.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.url),
                                                 max_export_batch_size=16, schedule_delay_millis=60_000))
    logger = LoggerProvider()
    logger.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{receiver.root}/v1/logs"),
                                                            max_export_batch_size=16, schedule_delay_millis=60_000))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer, logger_provider=logger)
    client = openai.OpenAI(base_url=fake.url, api_key="sk-fake", max_retries=0)
    sent = []
    for call in calls:
        if "messages" in call["request"]:
            continue  # Responses calls only: the built-in tools are theirs
        fake.answer = call["response"]
        try:
            _send(client, call["request"])
        except TypeError as exc:  # xAI's items the SDK does not know break the instrumentation, and the call
            print(f"not recorded: {call['response'].get('id')}: {exc}", file=sys.stderr)
            continue
        sent.append(call)
    instrumentor.uninstrument()  # the upload hook's files are written before its spans are flushed
    for provider in (tracer, logger):
        provider.force_flush()
        provider.shutdown()
    lines: dict[str, list[str]] = {"traces": [], "logs": []}
    for path, body, _ in receiver.bodies:
        lines["logs" if path.endswith("/logs") else "traces"].append(_collector_line(path, body))
    for name, written in lines.items():
        if written:
            (out / f"{name}.jsonl").write_text("".join(f"{line}\n" for line in written), encoding="utf-8")
    (out / "calls.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in sent),
                                     encoding="utf-8")


def remake_fixtures(python: str = sys.executable) -> None:
    """`fixtures/traces/genai-openai/<mode>/`, made again from the project's own fixture records."""
    OUT.mkdir(parents=True, exist_ok=True)
    calls = OUT / "replayed.jsonl"
    calls.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in fixture_calls()), encoding="utf-8")
    try:
        for mode in MODES:
            out = OUT / mode
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            with tempfile.TemporaryDirectory() as elsewhere:  # the hook uploads elsewhere; its files are then
                uploads = Path(elsewhere) / "uploads"      # moved beside the trace, as a user copies them
                uploads.mkdir()
                env = {**os.environ, **_environment(mode, uploads)}
                subprocess.run([python, "-m", "tests.servers.genai_openai_calls", mode, str(calls), str(out)],
                               check=True, cwd=FIXTURES.parent, env=env, timeout=600)
                if any(uploads.iterdir()):
                    shutil.copytree(uploads, out / "uploads")
        sent = {(OUT / mode / "calls.jsonl").read_text(encoding="utf-8") for mode in MODES}
        if len(sent) != 1:
            raise RuntimeError("the modes sent different calls")
        (OUT / "calls.jsonl").write_text(sent.pop(), encoding="utf-8")  # one copy: every mode sent the same
        for mode in MODES:
            (OUT / mode / "calls.jsonl").unlink()
    finally:
        calls.unlink()


def record_corpus(folder: Path, out: Path, mode: str = "span_only") -> None:
    """The responses of `folder` (the shared corpus's `responses/`, real replies) recorded in `mode` into `out`."""
    from tests.servers.instrumented_calls import corpus_records

    out.mkdir(parents=True, exist_ok=True)
    calls = out / "replayed.jsonl"
    calls.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in corpus_records(folder)),
                     encoding="utf-8")
    env = {**os.environ, **_environment(mode, out / "uploads")}
    subprocess.run([sys.executable, "-m", "tests.servers.genai_openai_calls", mode, str(calls), str(out)],
                   check=True, cwd=FIXTURES.parent, env=env, timeout=600)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--fixtures"]:
        remake_fixtures(*argv[1:])
        return
    if argv[:1] == ["--corpus"]:
        record_corpus(Path(argv[1]), Path(argv[2]))
        return
    _, calls, out = argv
    records = [json.loads(line) for line in Path(calls).read_text(encoding="utf-8").splitlines() if line.strip()]
    record(records, Path(out))


if __name__ == "__main__":
    main(sys.argv[1:])


_WRITTEN_INPUT = {"message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
                  "reasoning"}
_WRITTEN_OUTPUT = {"message", "function_call", "custom_tool_call", "reasoning", "code_interpreter_call",
                   "file_search_call", "image_generation_call", "mcp_call", "mcp_list_tools", "web_search_call"}
OUTPUT_ITEMS = "output items other than messages, function and custom calls, reasoning and server-side built-ins"
CONFIGURATION = "a configuration update in the input (it sets the answer's format)"
PHASE_OR_CALLER = "which messages were commentary (phase), which program made a call (caller)"
ANSWER_LOST = (OUTPUT_ITEMS, CONFIGURATION, PHASE_OR_CALLER)
"""The losses that change the answer too; with any other, the span holds the answer whole."""
BUILT_IN = {"code_interpreter_call", "file_search_call", "image_generation_call", "mcp_call", "mcp_list_tools",
            "web_search_call", "tool_search_call", "tool_search_output"}
"""The built-in tool items the instrumentation writes as `server_tool_call` (`…_response`) parts."""


def _held(item: dict[str, Any], output: bool) -> bool:
    kind = item.get("type", "message")
    if kind in ("tool_search_call", "tool_search_output"):
        return output and item.get("execution") == "server"
    return kind in (_WRITTEN_OUTPUT if output else _WRITTEN_INPUT)


def _sdk_form(item: dict[str, Any]) -> dict[str, Any]:
    """A built-in item as the instrumentation writes its payload: the SDK's fields, in its order, no nulls."""
    from openai._models import construct_type  # how the SDK reads a reply (leniently)
    from openai.types.responses import ResponseOutputItem

    made = construct_type(type_=ResponseOutputItem, value=item)
    return dict(made.model_dump(exclude_none=True, mode="json")) if hasattr(made, "model_dump") else item


def _tools_lost(request: dict[str, Any]) -> str | None:
    for tool in request.get("tools") or []:
        kind = tool.get("type")
        if kind == "namespace":
            return "the tools of a namespace (the span keeps the namespace's name only)"
        if kind in ("custom", "computer", "computer_use_preview", "tool_search") or kind not in (
                "function", "web_search", "web_search_preview", "file_search", "code_interpreter",
                "image_generation", "mcp"):
            return f"the definition of a {kind} tool (the span keeps its name and type)"
        if tool.get("allowed_callers") or tool.get("defer_loading"):
            return "which tools only programs call, and deferred loading"
        if kind == "function" and tool.get("strict") is False:
            return "function tools' strict flag"
        if kind == "function" and "description" in tool and tool["description"] is None:
            return "a function tool's null description (the span writes null for none too)"
    return None


def lost_in_genai_span(call: dict[str, Any]) -> str | None:  # noqa: PLR0911  (one return per loss)
    """What of a raw Responses record a span of the genai-openai instrumentation cannot hold (None: nothing).

    Read from its source (`response_extractors.py`): input items other than messages, function and
    custom tool calls and results and reasoning are not written (built-in items, compaction, item
    references, configuration updates, additional tools); of the output, MCP approval requests,
    shell and patch calls and client tool searches are not; built-in items are their SDK form (no
    nulls, the SDK's field order); tools keep only a name and a type (functions: description and
    parameters); a JSON text format becomes `gen_ai.output.type` json; annotations, a file's name,
    a refusal (as text), a message's phase, a function call's caller are dropped.
    """
    request, response = call["request"], call["response"]
    items = request["input"] if isinstance(request.get("input"), list) else []
    output = response.get("output") or []
    if any(i.get("type") == "configuration_update" for i in items):
        return CONFIGURATION
    if not all(_held(i, True) for i in output):
        return OUTPUT_ITEMS
    if any(i.get("phase") or i.get("caller") for i in [*items, *output]):
        return PHASE_OR_CALLER
    if not all(_held(i, False) for i in items):
        return "input items other than messages, function and custom tool calls and results, and reasoning"
    if any(i.get("type") in BUILT_IN and _sdk_form(i) != i for i in output):
        return "a built-in item's null fields and field order (its SDK form)"
    lost = _tools_lost(request)
    if lost:
        return lost
    if isinstance(request.get("text"), dict) and (request["text"].get("format") or {}).get("type") != "text":
        return "a structured output's schema"
    parts = [p for i in [*items, *output] for p in (i.get("content") if isinstance(i.get("content"), list) else [])]
    if any(p.get("annotations") for p in parts):
        return "citations (annotations)"
    if any(p.get("type") == "refusal" for p in parts):
        return "a refusal (written as text)"
    if any(p.get("type") == "input_file" and p.get("file_data") for p in parts):
        return "the name of a file sent inline"
    if any(i.get("call_id") == "" for i in [*items, *output]):
        return "an empty call id (xAI's)"
    return None
