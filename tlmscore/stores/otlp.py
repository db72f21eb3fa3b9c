"""Annotations as OpenTelemetry `gen_ai.evaluation.result` events: an OTLP logs request (pure).

One log record per annotation, with the GenAI semantic conventions' attributes
(`gen_ai.evaluation.name`, `gen_ai.evaluation.score.value`, `gen_ai.evaluation.score.label`,
`gen_ai.evaluation.explanation`, `gen_ai.response.id`) and, when the row's ids are known, the
trace and span ids of the span the row came from, so a backend shows the event on that span.

`logs_request` is the OTLP/JSON form (ids as hex, as OTLP/JSON writes them); `logs_protobuf`
encodes the same request as the OTLP/HTTP protobuf body (needs the `otel` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tlmscore.annotate._values import Annotation

EVENT_NAME = "gen_ai.evaluation.result"
SCOPE = "tlmscore"


def _attribute(key: str, value: str | float) -> dict[str, Any]:
    typed = {"doubleValue": value} if isinstance(value, float) else {"stringValue": value}
    return {"key": key, "value": typed}


def log_record(annotation: Annotation, time_unix_nano: int) -> dict[str, Any]:
    """One annotation as an OTLP/JSON log record."""
    attributes = [_attribute("gen_ai.evaluation.name", annotation.name)]
    if annotation.score is not None:
        attributes.append(_attribute("gen_ai.evaluation.score.value", annotation.score))
    attributes += [_attribute("gen_ai.evaluation.score.label", annotation.label),
                   _attribute("gen_ai.evaluation.explanation", annotation.explanation)]
    if annotation.response_id is not None:
        attributes.append(_attribute("gen_ai.response.id", annotation.response_id))
    attributes.append(_attribute("tlmscore.record.id", annotation.row_id))
    record: dict[str, Any] = {"timeUnixNano": str(time_unix_nano), "observedTimeUnixNano": str(time_unix_nano),
                              "eventName": EVENT_NAME, "attributes": attributes}
    if annotation.trace_id is not None:
        record["traceId"] = annotation.trace_id
        if annotation.span_id is not None:
            record["spanId"] = annotation.span_id
    return record


def logs_request(annotations: Sequence[Annotation], *, time_unix_nano: int, version: str = "") -> dict[str, Any]:
    """An OTLP/JSON `ExportLogsServiceRequest` holding one event per annotation."""
    return {"resourceLogs": [{
        "resource": {"attributes": [_attribute("service.name", "tlmscore")]},
        "scopeLogs": [{"scope": {"name": SCOPE, "version": version},
                       "logRecords": [log_record(a, time_unix_nano) for a in annotations]}],
    }]}


def _value(value: dict[str, Any]) -> Any:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue  # noqa: PLC0415  (the `otel` extra)

    if "doubleValue" in value:
        return AnyValue(double_value=value["doubleValue"])
    return AnyValue(string_value=value["stringValue"])


def _attributes(items: list[dict[str, Any]]) -> list[Any]:
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue  # noqa: PLC0415  (the `otel` extra)

    return [KeyValue(key=item["key"], value=_value(item["value"])) for item in items]


def _record(record: dict[str, Any]) -> Any:
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord  # noqa: PLC0415  (the `otel` extra)

    return LogRecord(time_unix_nano=int(record["timeUnixNano"]),
                     observed_time_unix_nano=int(record["observedTimeUnixNano"]),
                     event_name=record["eventName"], attributes=_attributes(record["attributes"]),
                     trace_id=bytes.fromhex(record.get("traceId", "")),
                     span_id=bytes.fromhex(record.get("spanId", "")))


def logs_protobuf(request: dict[str, Any]) -> bytes:
    """The OTLP/JSON request (as `logs_request` makes it) as the OTLP/HTTP protobuf body."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: PLC0415  (the `otel` extra)
        ExportLogsServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope  # noqa: PLC0415
    from opentelemetry.proto.logs.v1.logs_pb2 import ResourceLogs, ScopeLogs  # noqa: PLC0415
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource  # noqa: PLC0415

    message = ExportLogsServiceRequest(resource_logs=[
        ResourceLogs(resource=Resource(attributes=_attributes(resource["resource"]["attributes"])),
                     scope_logs=[ScopeLogs(scope=InstrumentationScope(name=scope["scope"]["name"],
                                                                      version=scope["scope"]["version"]),
                                           log_records=[_record(r) for r in scope["logRecords"]])
                                 for scope in resource["scopeLogs"]])
        for resource in request["resourceLogs"]])
    body: bytes = message.SerializeToString()
    return body
