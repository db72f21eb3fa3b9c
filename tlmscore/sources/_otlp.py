"""OTLP traces; GenAI spans become records.

Read: the OpenTelemetry Collector's file exporter (JSON lines of `ExportTraceServiceRequest`),
one such request as JSON, or an OTLP/HTTP protobuf body (`.pb`, `.binpb`).

A span is a record when it carries GenAI messages (`gen_ai.input.messages` / `gen_ai.output.messages`)
or the older per-message events (`gen_ai.user.message`, …, `gen_ai.choice`); a span whose content
was not captured but whose `gen_ai.response.id` is a Responses id (`resp_…`) is a record of that id
alone (`--hydrate` fills it in); other spans are not.
Records are numbered in file order (a line of the file can hold many spans); a record's error
names the file's line as well.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tlmscore._tables import rows
from tlmscore.sources._genai import as_value, genai_call
from tlmscore.sources._tables import Peek, Read

ORIGIN = "otlp"
_EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


def detect(sample: Peek) -> bool:
    """A JSON file of OTLP trace requests, or a protobuf body (`.pb`, `.binpb`)."""
    return sample.kind == "protobuf" or "resourceSpans" in sample.first or "resource_spans" in sample.first


def any_value(value: Any) -> Any:  # noqa: PLR0911  (one return per kind of value)
    """An OTLP `AnyValue` (`{"stringValue": …}`, arrays, key-value lists) as a plain value."""
    if not isinstance(value, Mapping):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
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
        content = as_value(body.get("gen_ai.event.content") or body.get("content"))
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
                      "arguments": as_value(function.get("arguments"))})
    return {"role": role, "parts": parts}


def _ids(span: Mapping[str, Any]) -> dict[str, Any]:
    span_id = hex_id(span.get("spanId") or span.get("span_id"), 8)
    return {"id": span_id, "origin": ORIGIN, "trace_id": hex_id(span.get("traceId") or span.get("trace_id"), 16),
            "span_id": span_id}


def _stored_only(span: Mapping[str, Any], attributes: Mapping[str, Any]) -> dict[str, Any] | None:
    """A GenAI span whose content was not captured: a record of its Responses id alone (for `--hydrate`)."""
    rid = attributes.get("gen_ai.response.id")
    if not isinstance(rid, str) or not rid.startswith("resp_"):
        return None
    metadata = {"span_name": span.get("name"), "model": attributes.get("gen_ai.request.model")}
    return {**_ids(span), "response_id": rid, "metadata": {k: v for k, v in metadata.items() if v is not None}}


def span_record(span: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record of one OTLP span with GenAI content; None for another span."""
    attributes = attributes_of(span.get("attributes"))
    if "gen_ai.input.messages" not in attributes and "gen_ai.output.messages" not in attributes:
        inputs, outputs = _event_messages(span.get("events"))
        if not outputs:
            return _stored_only(span, attributes)
        attributes = {**attributes, "gen_ai.input.messages": inputs, "gen_ai.output.messages": outputs}
    request, response, warnings = genai_call(attributes)
    span_id = hex_id(span.get("spanId") or span.get("span_id"), 8)
    metadata = {"span_name": span.get("name"), "operation": attributes.get("gen_ai.operation.name"),
                "provider": attributes.get("gen_ai.provider.name") or attributes.get("gen_ai.system"),
                "start_time_unix_nano": span.get("startTimeUnixNano"),
                "parent_id": hex_id(span.get("parentSpanId"), 8)}
    return {"id": span_id, "request": request, "response": response, "origin": ORIGIN,
            "trace_id": hex_id(span.get("traceId") or span.get("trace_id"), 16), "span_id": span_id,
            "metadata": {k: v for k, v in metadata.items() if v is not None}, "warnings": warnings}


def _spans(request: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for resource in request.get("resourceSpans") or []:
        for scope in resource.get("scopeSpans") or []:
            yield from scope.get("spans") or []


def _protobuf(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    from google.protobuf.json_format import MessageToDict  # noqa: PLC0415  (protobuf only for such a body)
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: PLC0415
        ExportTraceServiceRequest,
    )

    message = ExportTraceServiceRequest()
    message.ParseFromString(path.read_bytes())
    yield 1, MessageToDict(message)


def read(address: str) -> Iterator[Read]:
    """The GenAI spans of an OTLP file, numbered in order."""
    path = Path(address)
    suffix = path.suffix.lower()
    requests = _protobuf(path) if suffix in (".pb", ".binpb") else rows(path, "json" if suffix == ".json" else "jsonl")
    number = 0
    for line, request in requests:
        if isinstance(request, str):
            number += 1
            yield Read(number, error=f"line {line}: {request}")
            continue
        for span in _spans(request):
            try:
                record = span_record(span)
            except (ValueError, TypeError, AttributeError, json.JSONDecodeError) as exc:
                number += 1
                yield Read(number, error=f"line {line}: span {span.get('spanId')}: {exc}")
                continue
            if record is not None:
                number += 1
                yield Read(number, record)
