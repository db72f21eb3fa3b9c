"""Recorded calls replayed through the `openai` SDK under a real OpenTelemetry instrumentation.

`python -m tests.servers.instrumented_calls NAME CALLS OUT` sends each raw record of CALLS (JSON lines of
`{"request", "response"}`) through the official `openai` client to a local fake of the API, which
answers with that record's response, while the instrumentation NAME traces the client:

- `traceloop`: Traceloop's `opentelemetry-instrumentation-openai` (OpenLLMetry);
- `logfire`: `logfire.instrument_openai` (Pydantic Logfire, nothing sent to its service);
- `openai-v2`: the official `opentelemetry-instrumentation-openai-v2` with its content opt-in
  (`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`,
  `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`); `openai-v2-default`: the same
  without it. It wraps Chat Completions only, so only chat records are sent under it.

The spans go over OTLP/HTTP (protobuf; gzip-encoded for `traceloop` and `logfire`) to a local
receiver, which keeps every request body as it came (`bodies/NNN.binpb`, `.binpb.gz` when
gzip-encoded) and writes the Collector file exporter's JSON lines (`traces.jsonl`, ids as hex).
OUT also gets `calls.jsonl`: the records sent, in order. Each instrumentation patches the `openai`
package for the whole process, hence one process per instrumentation.
Re-make the fixtures with `python -m tests.servers.instrumented_calls --fixtures`.
"""

from __future__ import annotations

import base64
import gzip
import inspect
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT

INSTRUMENTATIONS = ("traceloop", "logfire", "openai-v2", "openai-v2-default")
CHAT_ONLY = ("openai-v2", "openai-v2-default")
GZIP = ("traceloop", "logfire")
FIXTURES = ROOT / "fixtures"
SOURCES = ("demo.jsonl", "citations.jsonl", "fidelity.jsonl", "items.jsonl", "phase.jsonl", "chain_a.jsonl",
           "chain_b.jsonl", "traces/plain.jsonl")
"""The project's own fixtures whose records are replayed for `fixtures/traces`."""


def _environment(name: str) -> dict[str, str]:
    env = {"OTEL_SEMCONV_STABILITY_OPT_IN": "", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "",
           "TRACELOOP_TRACE_CONTENT": "true", "OTEL_SDK_DISABLED": "false"}
    if name == "openai-v2":
        env.update({"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"})
    return env


def _responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events the API streams for `response`: each item added, its text as a delta, done."""
    events: list[dict[str, Any]] = [{"type": "response.created",
                                     "response": {**response, "status": "in_progress", "output": []}}]
    for index, item in enumerate(response["output"]):
        opened = {**item, "content": []} if item.get("type") == "message" else item
        events.append({"type": "response.output_item.added", "output_index": index, "item": opened})
        for part_index, part in enumerate(item.get("content") or [] if item.get("type") == "message" else []):
            where = {"item_id": item.get("id"), "output_index": index, "content_index": part_index}
            events.append({"type": "response.content_part.added", **where, "part": {**part, "text": ""}})
            if part.get("type") == "output_text":
                events.append({"type": "response.output_text.delta", **where, "delta": part["text"], "logprobs": []})
                events.append({"type": "response.output_text.done", **where, "text": part["text"], "logprobs": []})
            events.append({"type": "response.content_part.done", **where, "part": part})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def _chat_chunks(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks the API streams for a completion: the role, the text, the tool calls, the finish reason."""
    top = {k: response[k] for k in ("id", "created", "model") if k in response}
    message = response["choices"][0]["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        deltas.append({"tool_calls": [{"index": index, **call}]})
    chunks = [{**top, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
              for d in deltas]
    chunks.append({**top, "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {}, "finish_reason": response["choices"][0].get("finish_reason") or "stop"}]})
    return chunks


def _sse(request: dict[str, Any], response: dict[str, Any]) -> bytes:
    """A streamed answer: Responses events (named), or Chat Completions chunks closed by `[DONE]`."""
    if "choices" in response:
        return "".join(f"data: {json.dumps(c)}\n\n" for c in [*_chat_chunks(response)]).encode() + \
            b"data: [DONE]\n\n"
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in _responses_events(response)).encode()


class _Fake:
    """The fake API: every POST answers with the response of the call being made (`answer`), streamed when asked."""

    def __init__(self) -> None:
        self.answer: dict[str, Any] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                streamed = bool(request.get("stream"))
                body = _sse(request, fake.answer) if streamed else json.dumps(fake.answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" if streamed else "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- the base class's signature
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class _Receiver:
    """An OTLP/HTTP receiver (traces at `url`, logs at `root`/v1/logs) keeping each body as it came.

    Each is kept with the path it was sent to and whether it was gzip-encoded.
    """

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes, bool]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.bodies.append((self.path, body, self.headers.get("Content-Encoding") == "gzip"))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- the base class's signature
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.root}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _hex_ids(value: Any) -> Any:
    """protobuf's JSON mapping (ids in base64) as the Collector's file exporter writes it (ids in hex)."""
    if isinstance(value, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else _hex_ids(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def _collector_line(body: bytes, gzipped: bool) -> str:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest()
    message.ParseFromString(gzip.decompress(body) if gzipped else body)
    return json.dumps(_hex_ids(MessageToDict(message)), separators=(",", ":"))


def _instrument(name: str, receiver: str) -> Any:
    """The tracer provider the instrumentation writes to, exporting to `receiver`."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    compression = Compression.Gzip if name in GZIP else Compression.NoCompression
    processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver, compression=compression),
                                   max_export_batch_size=16, schedule_delay_millis=60_000)
    if name == "logfire":
        import logfire

        logfire.configure(send_to_logfire=False, console=False, service_name="recorder",
                          additional_span_processors=[processor])
        logfire.instrument_openai()
        return logfire
    provider = TracerProvider()
    provider.add_span_processor(processor)
    if name == "traceloop":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
    else:
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as OfficialInstrumentor

        OfficialInstrumentor().instrument(tracer_provider=provider)
    return provider


def _send(client: Any, request: dict[str, Any]) -> None:
    """One call through the SDK: the request's known keyword arguments, the others as `extra_body`."""
    method = client.chat.completions.create if "messages" in request else client.responses.create
    known = set(inspect.signature(method).parameters)
    kwargs = {k: v for k, v in request.items() if k in known}
    extra = {k: v for k, v in request.items() if k not in known}
    answer = method(**kwargs, **({"extra_body": extra} if extra else {}))
    if request.get("stream"):
        for _ in answer:  # the instrumentation ends the span when the stream is read to its end
            pass


def record(name: str, calls: list[dict[str, Any]], out: Path) -> None:
    """Replay `calls` under instrumentation `name`; the bodies, Collector lines and calls go to `out`."""
    import openai

    fake, receiver = _Fake(), _Receiver()
    provider = _instrument(name, receiver.url)
    client = openai.OpenAI(base_url=fake.url, api_key="sk-fake", max_retries=0)
    sent = []
    for call in calls:
        if name in CHAT_ONLY and "messages" not in call["request"]:
            continue
        fake.answer = call["response"]
        _send(client, call["request"])
        sent.append(call)
    provider.force_flush()
    provider.shutdown()
    (out / "bodies").mkdir(parents=True, exist_ok=True)
    lines = []
    for number, (_, body, gzipped) in enumerate(receiver.bodies, start=1):
        (out / "bodies" / f"{number:03d}.binpb{'.gz' if gzipped else ''}").write_bytes(body)
        lines.append(_collector_line(body, gzipped))
    (out / "traces.jsonl").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    (out / "calls.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in sent),
                                     encoding="utf-8")


def replayable(records: list[Any]) -> list[dict[str, Any]]:
    """The records the API could have answered: a request and a response the SDK parses (no errors, no bare ids)."""
    calls = []
    for record in records:
        if not isinstance(record, dict) or not isinstance(record.get("request"), dict):
            continue
        request, response = record["request"], record.get("response")
        if not isinstance(response, dict) or not ("output" in response or "choices" in response):
            continue
        if request.get("previous_response_id") or request.get("conversation") or request.get("prompt"):
            continue  # a follow-up names an earlier call the fake API does not hold
        if response.get("status") in ("failed", "queued", "in_progress", "cancelled"):
            continue
        calls.append({"request": request, "response": response})
    return calls


def fixture_calls() -> list[dict[str, Any]]:
    """The project's own fixture records that are replayed for `fixtures/traces`."""
    records: list[Any] = []
    for name in SOURCES:
        for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    calls = replayable(records)
    plain = [json.loads(line) for line in (FIXTURES / "traces" / "plain.jsonl").read_text("utf-8").splitlines()]
    return [*calls, *(streamed(c) for c in replayable(plain))]


def streamed(call: dict[str, Any]) -> dict[str, Any]:
    """The same call made with `stream=True`, its response under an id of its own (Traceloop keeps spans by id)."""
    response = dict(call["response"])
    response["id"] = f"{response['id']}s"
    return {"request": {**call["request"], "stream": True}, "response": response}


def run(name: str, calls: Path, out: Path) -> None:
    """Record in a process of its own (the instrumentation patches `openai` for the whole process)."""
    env = {**os.environ, **_environment(name)}
    subprocess.run([sys.executable, "-m", "tests.servers.instrumented_calls", name, str(calls), str(out)],
                   check=True, cwd=ROOT, env=env, timeout=600)


def remake_fixtures() -> None:
    """`fixtures/traces/<instrumentation>/`, made again from the project's own fixture records."""
    folder = FIXTURES / "traces"
    folder.mkdir(exist_ok=True)
    calls = folder / "replayed.jsonl"
    calls.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in fixture_calls()), encoding="utf-8")
    try:
        for name in INSTRUMENTATIONS:
            out = folder / name
            for old in [*out.glob("bodies/*"), *out.glob("*.jsonl")]:
                old.unlink()
            run(name, calls, out)
    finally:
        calls.unlink()


def main(argv: list[str]) -> None:
    if argv == ["--fixtures"]:
        remake_fixtures()
        return
    name, calls, out = argv
    records = [json.loads(line) for line in Path(calls).read_text(encoding="utf-8").splitlines() if line.strip()]
    record(name, records, Path(out))


if __name__ == "__main__":
    main(sys.argv[1:])


_HELD_OUTPUT = {"message", "function_call", "reasoning"}
_HELD_INPUT = {"message", "function_call", "function_call_output"}


def _parts(item: dict[str, Any]) -> list[Any]:
    content = item.get("content")
    return content if isinstance(content, list) else []


def _chat_lost(call: dict[str, Any], name: str) -> str | None:
    response = call["response"]
    if name.startswith("openai-v2") and call["request"].get("tools"):
        return "tool definitions"
    if response.get("citations") or response.get("search_results"):
        return "provider fields (citations, search results)"
    message = (response.get("choices") or [{}])[0].get("message") or {}
    if message.get("annotations") or message.get("reasoning_content") or message.get("reasoning"):
        return "annotations or reasoning of the message"
    if any(not isinstance(m.get("content"), (str, type(None))) for m in call["request"]["messages"]):
        return "message content other than text"
    return None


def _responses_lost(call: dict[str, Any], name: str) -> str | None:  # noqa: PLR0911  (one return per loss)
    request, response = call["request"], call["response"]
    output = response.get("output") or []
    items = request["input"] if isinstance(request.get("input"), list) else []
    if any(i.get("type") not in _HELD_OUTPUT for i in output):
        return "built-in tool items of the output"
    if any(i.get("caller") or i.get("namespace") for i in [*output, *items]):
        return "the program or namespace of a function call"
    if any(i.get("type", "message") not in _HELD_INPUT for i in items):
        return "input items other than messages and function calls"
    if any(a for i in output for p in _parts(i) for a in p.get("annotations") or []):
        return "citations (annotations)"
    if any(p.get("type") == "refusal" for i in output for p in _parts(i)) or request.get("text"):
        return "a refusal or a structured output's text format"
    if any(p.get("type") == "input_file" and p.get("file_data") for i in items for p in _parts(i)):
        return "the name or content of a file sent inline"
    messages = [i for i in output if i.get("type") == "message"]
    if name == "logfire":
        if any(not i.get("content") for i in items if i.get("type", "message") == "message"):
            return "messages without content"
        return "which messages were commentary" if len(messages) > 1 else None
    if any(t.get("type") != "function" or t.get("strict") is False for t in request.get("tools") or []):
        return "built-in tools and function tools' strict flag"
    if len(messages) > 1 or any(len(_parts(m)) > 1 for m in messages):
        return "several output messages or parts (joined into one text)"
    if any(i.get("type") == "function_call" for i in output):
        return "the call ids of the answer's function calls (named by item id)"
    return None


def lost_in_span(call: dict[str, Any], name: str) -> str | None:
    """What of a raw record a span of instrumentation `name` cannot hold (None: nothing; a plain record).

    Read from each instrumentation's source: both Traceloop and logfire keep only messages and
    function calls of a Responses call, without annotations, refusals as text and no text format;
    Traceloop also joins the answer's text into one part, keeps only function tools (without
    `strict`), names the answer's function calls by item id and keeps only the name of a file sent
    inline; logfire drops messages without content and a file's name. A Chat Completions span
    holds the messages, not provider fields (citations, search results) or reasoning; the official
    instrumentation's, no tool definitions.
    """
    if "messages" in call["request"]:
        return _chat_lost(call, name)
    return _responses_lost(call, name)


def corpus_records(folder: Path) -> list[dict[str, Any]]:
    """Calls that get the recorded responses of `folder` (the shared corpus), sent as a caller would send them.

    Each request asks for its response by a question of its own, with what the response echoes of
    its request: the instructions, the tools offered, the response it continues.
    """
    calls = []
    for path in sorted(folder.glob("*.json")):
        response = json.loads(path.read_text(encoding="utf-8"))
        question = f"About {path.stem}?"
        if response.get("object") == "chat.completion":
            request: dict[str, Any] = {"model": str(response.get("model") or path.stem),
                                       "messages": [{"role": "user", "content": question}]}
        elif response.get("object") == "response" and "output" in response:
            request = {"model": str(response.get("model") or path.stem), "input": question}
            for key in ("instructions", "tools", "previous_response_id"):
                if response.get(key):
                    request[key] = response[key]
        else:
            continue  # an API error object: the API would not return it as a response
        calls.append({"request": request, "response": response})
    return replayable(calls)
