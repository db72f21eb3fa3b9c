"""OTLP logs: the GenAI events that hold a call's messages where its span does not.

With `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY` (or `SPAN_AND_EVENT`) the
official OpenTelemetry GenAI instrumentations write a call's messages to a log record, the
`gen_ai.client.inference.operation.details` event, emitted in the context of the call's span (its
`traceId` and `spanId`), with the span's other attributes too. The Collector exports log records
as it does spans: its file exporter writes JSON lines of `ExportLogsServiceRequest`
(`resourceLogs`), OTLP/HTTP sends protobuf bodies.

A spans file's events are found, by content, in the spans file itself (one file exporter in both
pipelines writes both kinds of line to one file) and in the logs file beside it: the spans file's
name with `logs` in place of `traces` or `spans` (`traces.jsonl` → `logs.jsonl`,
`otel-spans.pb` → `otel-logs.pb`). `events` gives them by (trace id, span id), for the OTLP
reader to join to their spans. A logs file read on its own (`read`) gives one record per event,
under the ids of its span: what the event holds is the whole call but the span's name and status.

`read_spans` is the reader of OTLP trace files: each span read with its events and the content
the completion hook uploaded (`tlmscore.stores.genai_uploads`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from itertools import chain
from pathlib import Path
from typing import Any

from tlmscore.stores import otlp_spans as _otlp
from tlmscore.stores.genai_uploads import uploaded
from tlmscore.stores.otlp_spans import attributes_of, hex_id, requests_of, span_record
from tlmscore.stores.reading import Peek, Read, SourceReader

__all__ = ["LOGS_READER", "SPANS_READER", "detect", "read", "read_spans"]

EVENT = "gen_ai.client.inference.operation.details"
Events = dict[tuple[str | None, str | None], dict[str, Any]]
"""The attributes of each operation-details event, by the (trace id, span id) of its span."""


def detect(sample: Peek) -> bool:
    """A JSON file of OTLP log requests."""
    return "resourceLogs" in sample.first or "resource_logs" in sample.first


def _records(request: Mapping[str, Any]) -> Iterator[tuple[str | None, Mapping[str, Any]]]:
    """Each operation-details log record of a request, with the name of its instrumentation scope."""
    for resource in request.get("resourceLogs") or request.get("resource_logs") or []:
        for scope in resource.get("scopeLogs") or resource.get("scope_logs") or []:
            name = (scope.get("scope") or {}).get("name")
            for record in scope.get("logRecords") or scope.get("log_records") or []:
                attributes = attributes_of(record.get("attributes"))
                if (record.get("eventName") or record.get("event_name") or attributes.get("event.name")) == EVENT:
                    yield name, {**record, "attributes": attributes}


def _key(record: Mapping[str, Any]) -> tuple[str | None, str | None]:
    return (hex_id(record.get("traceId") or record.get("trace_id"), 16),
            hex_id(record.get("spanId") or record.get("span_id"), 8))


def companion(spans: Path) -> Path | None:
    """The logs file beside a spans file: its name with `logs` for `traces` or `spans`; None when there is none."""
    for word in ("traces", "spans", "trace", "span"):
        if word in spans.name:
            found = spans.with_name(spans.name.replace(word, "logs", 1))
            if found != spans and found.is_file():
                return found
    return None


def events(spans: Path) -> Events:
    """The operation-details events of a spans file's calls: in the file itself and its logs file beside it."""
    with _otlp.open_body(spans) as handle:  # one file exporter in both pipelines writes both kinds of line
        mixed = spans.suffix.lower() != ".parquet" and any(b"resourceLogs" in line for line in handle)
    logs = companion(spans)
    requests = chain(requests_of(spans) if mixed else (), requests_of(logs, logs=True) if logs is not None else ())
    return {_key(record): record["attributes"] for _, request in requests if isinstance(request, Mapping)
            for _, record in _records(request)}


def read(address: str) -> Iterator[Read]:
    """The operation-details events of a logs file, one record each, numbered in order."""
    number, base = 0, Path(address).parent
    for line, request in requests_of(Path(address)):
        if isinstance(request, str):
            number += 1
            yield Read(number, error=f"line {line}: {request}")
            continue
        for scope, record in _records(request):
            number += 1
            trace_id, span_id = _key(record)
            span: dict[str, Any] = {"traceId": trace_id, "spanId": span_id, "attributes": [], "name": None}
            try:
                made = span_record(span, scope, {**record["attributes"], **uploaded(record["attributes"], base)})
            except (ValueError, TypeError, AttributeError, json.JSONDecodeError) as exc:
                yield Read(number, error=f"line {line}: event of span {span_id}: {exc}")
                continue
            yield Read(number, made) if made is not None else Read(number, error=f"line {line}: event of span "
                                                                         f"{span_id} holds no call")


def read_spans(address: str) -> Iterator[Read]:
    """The GenAI spans of an OTLP trace file, each with its events' attributes and its uploaded content."""
    path = Path(address)
    joined = events(path) if path.is_file() else {}

    def content(span: Mapping[str, Any]) -> Mapping[str, Any]:
        found = dict(joined.get(_key(span), {}))
        own = {**found, **attributes_of(span.get("attributes"))}
        return {**found, **uploaded(own, path.parent)}

    yield from _otlp.read(address, content)


SPANS_READER = SourceReader("otlp", _otlp.detect, read_spans, wants="`resourceSpans` (OTLP JSON) or a protobuf body")
"""OTLP trace files (JSON or protobuf), with their GenAI log events where they sit beside them."""
LOGS_READER = SourceReader("otlp-logs", detect, read,
                           wants="`resourceLogs` holding `gen_ai.client.inference.operation.details` events")
"""A file of GenAI log events alone."""
