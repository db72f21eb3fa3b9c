"""Every recorded call, as OpenTelemetry GenAI spans, reads as its raw record does.

The calls are the project's recorded replies (`fixtures/responses/`) and, when the shared corpus
is beside the clone, its recorded responses as more cases.

No instrumentation writes Responses calls as GenAI spans yet (`opentelemetry-instrumentation-openai-v2`
wraps Chat Completions only), so the spans are made here with the OpenTelemetry SDK from the
convention's message schema, as an instrumentation following it would: instructions as
`gen_ai.system_instructions`, function tools as `gen_ai.tool.definitions`, each output message as an
output message, function calls as `tool_call` parts, reasoning summaries as `reasoning` parts, and
every other output item (a built-in tool's call) as a `server_tool_call` part. The SDK's own OTLP
encoder writes the protobuf body, which is read as a file.

Where the convention holds what the raw record holds, the prompt and response are the same bytes;
where the span holds a trace of what it lost (a built-in tool, several output messages), the row
says so. What leaves no trace in a span (provider fields such as Perplexity's citations, tool kinds
other than functions, tools only a program may call) is named from the raw record by the test.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.servers.trace_store_calls import corpus_calls
from tlmscore.stores import READERS as REGISTRY
from tlmscore.stores import find_reader

pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder",
                    reason="the OTLP exporter that encodes the spans is not installed: pip install -e '.[dev]'")

CLIENT_CALLS = {"function_call", "custom_tool_call"}
BUILT_IN = "is shown as a function call"
SEVERAL_ANSWERS = "assistant messages and not which were commentary"


def _output_parts(item: dict[str, Any]) -> list[dict[str, Any]]:
    kind = str(item.get("type"))
    if kind == "message":
        return [{"type": "text", "content": c.get("text", c.get("refusal", ""))} for c in item.get("content") or []
                if c.get("type") in ("output_text", "refusal")]
    if kind in CLIENT_CALLS:
        arguments: Any = item.get("arguments", item.get("input"))
        with contextlib.suppress(TypeError, json.JSONDecodeError):  # free text (a custom tool's input) stays text
            arguments = json.loads(arguments)
        return [{"type": "tool_call", "id": item.get("call_id"), "name": item.get("name"), "arguments": arguments}]
    if kind == "reasoning":
        return [{"type": "reasoning", "content": "".join(s.get("text", "") for s in item.get("summary") or [])}]
    name = kind.removesuffix("_call")
    body = {k: v for k, v in item.items() if k not in ("id", "status", "type")}
    return [{"type": "server_tool_call", "id": item.get("id"), "name": name,
             "server_tool_call": {"type": name, **body}}]


def _responses_messages(call: dict[str, Any]) -> tuple[list[Any], list[Any], list[Any], str]:
    request, response = call["request"], call["response"]
    inputs = [{"role": "user", "parts": [{"type": "text", "content": request["input"]}]}]
    finish = "length" if response.get("status") == "incomplete" else "stop"
    outputs: list[dict[str, Any]] = []
    for item in response.get("output") or []:
        text = item.get("type") == "message"
        if text or not outputs or outputs[-1]["parts"][-1]["type"] == "text":
            outputs.append({"role": "assistant", "parts": [], "finish_reason": finish})
        outputs[-1]["parts"].extend(_output_parts(item))
    tools = [{"type": "function", "name": t["name"], "description": t.get("description"),
              "parameters": t.get("parameters")} for t in response.get("tools") or [] if t.get("type") == "function"]
    return inputs, outputs, tools, finish


def _chat_messages(call: dict[str, Any]) -> tuple[list[Any], list[Any], list[Any], str]:
    choice = call["response"]["choices"][0]
    message = choice["message"]
    parts: list[dict[str, Any]] = [{"type": "text", "content": message.get("content") or ""}]
    parts += [{"type": "tool_call", "id": c["id"], "name": c["function"]["name"],
               "arguments": json.loads(c["function"]["arguments"])} for c in message.get("tool_calls") or []]
    inputs = [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
              for m in call["request"]["messages"] if m["role"] != "system"]
    return inputs, [{"role": "assistant", "parts": parts, "finish_reason": choice["finish_reason"]}], [], \
        choice["finish_reason"]


def _attributes(call: dict[str, Any]) -> dict[str, Any]:
    request, response = call["request"], call["response"]
    chat = "messages" in request
    inputs, outputs, tools, finish = (_chat_messages if chat else _responses_messages)(call)
    system = [m["content"] for m in request["messages"] if m["role"] == "system"] if chat else [request["instructions"]]
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                  "gen_ai.request.model": request["model"], "gen_ai.response.model": response.get("model"),
                  "gen_ai.response.id": response.get("id"), "gen_ai.response.finish_reasons": [finish],
                  "gen_ai.system_instructions": json.dumps([{"type": "text", "content": s} for s in system]),
                  "gen_ai.input.messages": json.dumps(inputs), "gen_ai.output.messages": json.dumps(outputs)}
    if tools:
        attributes["gen_ai.tool.definitions"] = json.dumps(tools)
    return {k: v for k, v in attributes.items() if v is not None}


def _body(calls: dict[str, dict[str, Any]]) -> bytes:
    """An OTLP/HTTP protobuf body: one GenAI span per call, in order, each in a trace of its own."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("corpus")
    for stem, call in calls.items():
        with tracer.start_as_current_span(f"chat {stem}") as span:
            span.set_attributes(_attributes(call))
    body: bytes = encode_spans(exporter.get_finished_spans()).SerializeToString()
    return body


def _lost_without_a_trace(call: dict[str, Any]) -> str | None:
    """What of this raw record the convention has no place for and a span keeps no trace of."""
    response = call["response"]
    if response.get("citations") or response.get("search_results"):
        return "provider fields (citations, search results)"
    tools = response.get("tools") or []
    if any(t.get("type") != "function" for t in tools):
        return "tools of kinds other than function"
    if any("allowed_callers" in t or t.get("defer_loading") for t in tools):
        return "which tools only a program may call, or are loaded by a tool search"
    return None


@pytest.fixture(scope="module")
def read(tmp_path_factory: pytest.TempPathFactory,
         recorded_responses: Path) -> tuple[dict[str, dict[str, Any]], Any, Any]:
    calls = corpus_calls(recorded_responses)
    folder = tmp_path_factory.mktemp("otlp-corpus")
    path = folder / "traces.pb"
    path.write_bytes(_body(calls))
    assert find_reader(str(path)) is REGISTRY["otlp"]
    settings = tlmscore.Settings(offline=True, cache_dir=folder / "cache")
    return calls, tlmscore.prepare(path, settings), tlmscore.prepare(list(calls.values()), settings)


def test_every_corpus_call_reads_as_its_raw_record_or_says_what_was_lost(
        read: tuple[dict[str, dict[str, Any]], Any, Any]) -> None:
    calls, rows, raw = read
    assert len(rows) == len(calls) and rows["error"].isna().all(), list(rows["error"].dropna())
    assert list(rows["response_id"]) == list(raw["response_id"]) and set(rows["origin"]) == {"otlp"}
    same = 0
    for (stem, call), got, want in zip(calls.items(), rows.to_dict("records"), raw.to_dict("records"), strict=True):
        equal = got["prompt"] == want["prompt"] and got["response"] == want["response"]
        said = " ".join(got["warnings"])
        built_in = [i["type"] for i in call["response"].get("output") or []
                    if i.get("type") not in ("message", "reasoning", *CLIENT_CALLS)]
        if built_in:
            assert BUILT_IN in said, (stem, built_in, said)  # the row says its built-in tools were not seen
        if not (BUILT_IN in said or SEVERAL_ANSWERS in said or _lost_without_a_trace(call)):
            assert equal, stem  # the span holds all the raw record holds: the same bytes
            same += 1
    assert same >= len(calls) // 8  # text, reasoning, function calls and their tools, Chat Completions


def test_several_output_messages_are_said_to_be_read_as_one_answer(
        read: tuple[dict[str, dict[str, Any]], Any, Any]) -> None:
    calls, rows, raw = read
    phased = [i for i, call in enumerate(calls.values())
              if sum(1 for item in call["response"].get("output") or [] if item.get("type") == "message") > 1]
    assert phased, "the corpus has a call answered in several messages (commentary, then the answer)"
    for i in phased:
        assert SEVERAL_ANSWERS in " ".join(rows["warnings"][i])
        assert raw["response"][i] in rows["response"][i]  # the final answer is there, after the commentary
