"""OTLP traces; GenAI spans become records.

Read by content, whatever the file's name: the OpenTelemetry Collector's file exporter (JSON lines
of `ExportTraceServiceRequest`), one such request as JSON, or an OTLP/HTTP protobuf body; any of
them gzip-encoded (as OTLP/HTTP bodies often are).

A span is a record when it carries GenAI messages (`gen_ai.input.messages` / `gen_ai.output.messages`)
or the older per-message events (`gen_ai.user.message`, …, `gen_ai.choice`), read as the
instrumentation that wrote it (its scope) writes them (`tlmscore.stores.genai`); logfire's span
of a streamed call holds only its request, and the span it logs when the stream ends the whole call,
so only that one is a record. A record of a
Responses call (`gen_ai.response.id` `resp_…`) also names that id as `hydrate_id`: `--hydrate`
reads the call from the stored response, which holds what the span could not. A span whose content
was not captured is a record of its Responses id alone (`--hydrate` fills it in); an LLM call's
span with neither is an error row that says which setting captures the content; other spans are
not records. Records are numbered in file order (a line of the file can hold many spans); a
record's error names the file's line as well.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from tlmscore._tables import json_cell, rows
from tlmscore.errors import TranscriptError
from tlmscore.stores.genai import GENAI_OPENAI, LOGFIRE, OFFICIAL, TRACELOOP, genai_call, instrumentation
from tlmscore.stores.reading import Peek, Read

__all__ = ["attributes_of", "detect", "hex_id", "read", "requests_of", "span_record"]

ORIGIN = "otlp"
_EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


def detect(sample: Peek) -> bool:
    """A JSON file of OTLP trace requests, or a protobuf body (`.pb`, `.binpb`)."""
    return sample.kind == "protobuf" or "resourceSpans" in sample.first or "resource_spans" in sample.first


def _camel(name: str) -> str:
    """A protobuf field name as OTLP/JSON spells it: `string_value` → `stringValue`."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def any_value(value: Any) -> Any:  # noqa: PLR0911  (one return per kind of value)
    """An OpenTelemetry `AnyValue` (`{"stringValue": …}`, arrays, key-value lists) as a plain value.

    Its fields may be spelt as OTLP/JSON spells them (`stringValue`) or as protobuf names them
    (`string_value`, as MLflow's API writes them).
    """
    if not isinstance(value, Mapping):
        return value
    value = {_camel(str(key)): item for key, item in value.items()}
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])  # 64-bit integers come as text
    if "arrayValue" in value:
        return [any_value(v) for v in value["arrayValue"].get("values") or []]
    if "kvlistValue" in value:
        return attributes_of(value["kvlistValue"].get("values") or [])
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def attributes_of(pairs: Any) -> dict[str, Any]:
    """OTLP key-value attributes as a dict."""
    return {str(p.get("key")): any_value(p.get("value")) for p in pairs or [] if isinstance(p, Mapping)}


def hex_id(value: Any, size: int) -> str | None:
    """A trace or span id as hex: OTLP/JSON writes hex, protobuf's JSON mapping base64."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) == size * 2:
        return value.lower()
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        return value


def _event_messages(events: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """GenAI messages (input, output) from the older per-message span events."""
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for event in events or []:
        name = event.get("name")
        body = attributes_of(event.get("attributes"))
        content = json_cell(body.get("gen_ai.event.content") or body.get("content"))
        data = content if isinstance(content, Mapping) else {"content": content}
        if name in _EVENT_ROLES:
            inputs.append(_event_message(_EVENT_ROLES[str(name)], data))
        elif name == "gen_ai.choice":
            inner = data.get("message")
            message: Mapping[str, Any] = inner if isinstance(inner, Mapping) else data
            outputs.append({**_event_message("assistant", message), "finish_reason": data.get("finish_reason")})
    return inputs, outputs


def _event_message(role: str, data: Mapping[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": data.get("id") or data.get("tool_call_id"),
                      "response": data.get("content")})
    elif data.get("content") is not None:
        parts.append({"type": "text", "content": str(data.get("content"))})
    for call in data.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                      "arguments": json_cell(function.get("arguments"))})
    return {"role": role, "parts": parts}


def _ids(span: Mapping[str, Any]) -> dict[str, Any]:
    span_id = hex_id(span.get("spanId") or span.get("span_id"), 8)
    return {"id": span_id, "origin": ORIGIN, "trace_id": hex_id(span.get("traceId") or span.get("trace_id"), 16),
            "span_id": span_id}


_LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
_IN_LOGS = ("if OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT was EVENT_ONLY the messages are in log records, "
            "read with the spans when in the same file or in the logs file beside it (logs.jsonl beside "
            "traces.jsonl); else set it to SPAN_ONLY where the calls are traced")
_CAPTURE = {OFFICIAL: "set OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and "
                      "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY where the calls are traced "
                      "(without them the instrumentation writes content only as log events, if at all)",
            TRACELOOP: "set TRACELOOP_TRACE_CONTENT=true where the calls are traced", GENAI_OPENAI: _IN_LOGS}
_CAPTURE_ANY = ("turn on the instrumentation's message content capture (OpenTelemetry GenAI instrumentations: "
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY)")


def _stored_only(span: Mapping[str, Any], attributes: Mapping[str, Any], scope: str | None) -> dict[str, Any] | None:
    """A GenAI span whose content was not captured: a record of its Responses id alone (for `--hydrate`).

    An LLM call's span with no Responses id is a record of its error (`source_error`), which says
    which setting captures the content; a span of another kind is None.
    """
    rid = attributes.get("gen_ai.response.id")
    if not isinstance(rid, str) or not rid.startswith("resp_"):
        if attributes.get("gen_ai.operation.name") in _LLM_OPERATIONS:  # the row of the call says how to get it
            return {**_ids(span), "source_error": f"the span of this {attributes.get('gen_ai.operation.name')} "
                    f"call holds no message content: {_CAPTURE.get(instrumentation(scope) or '', _CAPTURE_ANY)}"}
        return None
    metadata = {"span_name": span.get("name"), "model": attributes.get("gen_ai.request.model")}
    return {**_ids(span), "response_id": rid, "metadata": {k: v for k, v in metadata.items() if v is not None}}


def _unanswered(span: Mapping[str, Any], attributes: Mapping[str, Any], scope: str | None) -> str | None:
    """Why a span that holds a request but no answer is no record: `failed`, `stream` (logfire), else None.

    A call that failed has no answer; logfire's span of a streamed call holds only the request,
    and the span it logs when the stream ends holds the whole call.
    """
    failed = (span.get("status") or {}).get("code") in ("STATUS_CODE_ERROR", 2)
    if "gen_ai.output.messages" in attributes or (attributes.get("gen_ai.response.id") and not failed):
        return None
    if failed:  # an answer that came and broke the instrumentation (so the call) is no answer either
        return "failed"
    return "stream" if instrumentation(scope) == LOGFIRE and "gen_ai.input.messages" in attributes else None


def span_record(span: Mapping[str, Any], scope: str | None = None,
                extra: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The record of one OTLP span with GenAI content (`scope`: its instrumentation scope); None for another span.

    `extra`: attributes kept apart from the span (its log events', uploaded content), which the span's own override.
    """
    attributes = {**(extra or {}), **attributes_of(span.get("attributes"))}
    unanswered = _unanswered(span, attributes, scope)
    if unanswered == "failed":
        said = (span.get("status") or {}).get("message") or "status ERROR"
        return {**_ids(span), "source_error": f"the call failed: {said}"}
    if unanswered == "stream":
        return None
    if "gen_ai.input.messages" not in attributes and "gen_ai.output.messages" not in attributes:
        inputs, outputs = _event_messages(span.get("events"))
        if not outputs:
            return _stored_only(span, attributes, scope)
        attributes = {**attributes, "gen_ai.input.messages": inputs, "gen_ai.output.messages": outputs}
    request, response, warnings = genai_call(attributes, scope, span.get("name"))
    metadata = {"span_name": span.get("name"), "operation": attributes.get("gen_ai.operation.name"),
                "provider": attributes.get("gen_ai.provider.name") or attributes.get("gen_ai.system"),
                "instrumentation": scope, "start_time_unix_nano": span.get("startTimeUnixNano"),
                "parent_id": hex_id(span.get("parentSpanId"), 8)}
    record = {**_ids(span), "request": request, "response": response,
              "metadata": {k: v for k, v in metadata.items() if v is not None}, "warnings": warnings}
    rid = response.get("id")
    if isinstance(rid, str) and rid.startswith("resp_"):
        record["hydrate_id"] = rid
    return record


def _spans(request: Mapping[str, Any]) -> Iterator[tuple[str | None, Mapping[str, Any]]]:
    """Each span of a request, with the name of the instrumentation scope that wrote it."""
    for resource in request.get("resourceSpans") or []:
        for scope in resource.get("scopeSpans") or []:
            name = (scope.get("scope") or {}).get("name")
            for span in scope.get("spans") or []:
                yield name, span


def open_body(path: Path) -> IO[bytes]:
    """The file, gzip decoded when its first bytes say it is gzip (whatever its name)."""
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else path.open("rb")  # type: ignore[return-value]  # GzipFile is a binary IO


def _protobuf(data: bytes, logs: bool) -> Iterator[tuple[int, dict[str, Any] | str]]:
    from google.protobuf.json_format import MessageToDict  # noqa: PLC0415  (protobuf only for such a body)
    from google.protobuf.message import DecodeError  # noqa: PLC0415
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: PLC0415
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415
        ExportTraceServiceRequest,
    )

    message = ExportLogsServiceRequest() if logs else ExportTraceServiceRequest()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise ValueError(f"not an OTLP {'log' if logs else 'trace'} request (JSON or protobuf): {exc}") from None
    yield 1, MessageToDict(message)


def _request(value: Any) -> dict[str, Any] | str:
    return value if isinstance(value, dict) else f"row must be a JSON object, not {type(value).__name__}"


def _json(handle: IO[bytes], first: bytes) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """The requests of JSON text: one a line (the Collector's file exporter), streamed; else one document."""
    try:
        head = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):  # a document spread over lines (or an array)
        whole = json.loads((first + handle.read()).decode("utf-8-sig"))
        yield from enumerate((_request(v) for v in (whole if isinstance(whole, list) else [whole])), start=1)
        return
    yield 1, _request(head)
    for number, raw in enumerate(handle, start=2):
        if not raw.strip():
            continue
        try:
            yield number, _request(json.loads(raw))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            yield number, f"invalid JSON: {exc}"


def requests_of(path: Path, *, logs: bool = False) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """The OTLP requests of a file, numbered by line: JSON or protobuf, gzip-encoded or not, by content.

    `logs`: a protobuf body is a log request (`ExportLogsServiceRequest`), not a trace request.
    """
    if path.suffix.lower() == ".parquet":
        yield from rows(path, "parquet")
        return
    with open_body(path) as handle:
        first = handle.readline()
        if first.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):
            yield from _json(handle, first.lstrip(b"\xef\xbb\xbf"))
        else:
            try:
                yield from _protobuf(first + handle.read(), logs)
            except ImportError as exc:  # an install without it (tlmscore depends on it): one line, not a traceback
                raise TranscriptError(f"{path}: an OTLP protobuf body needs the opentelemetry-proto package "
                                      f"(pip install opentelemetry-proto): {exc}") from None


def read(address: str, content: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None) -> Iterator[Read]:
    """The GenAI spans of an OTLP file, numbered in order; `content(span)`: what is kept apart from a span."""
    number = 0
    for line, request in requests_of(Path(address)):
        if isinstance(request, str):
            number += 1
            yield Read(number, error=f"line {line}: {request}")
            continue
        for scope, span in _spans(request):
            try:
                record = span_record(span, scope, content(span) if content is not None else None)
            except (ValueError, TypeError, AttributeError, json.JSONDecodeError) as exc:
                number += 1
                yield Read(number, error=f"line {line}: span {span.get('spanId')}: {exc}")
                continue
            if record is not None:
                number += 1
                yield Read(number, record)
