"""OpenTelemetry: GenAI spans in (OTLP trace and log files, OpenInference span exports), evaluation events out.

Write-back: one `gen_ai.evaluation.result` event per annotation, an OTLP log record with the
GenAI semantic conventions' attributes (`gen_ai.evaluation.name`, `gen_ai.evaluation.score.value`,
`gen_ai.evaluation.score.label`, `gen_ai.evaluation.explanation`, `gen_ai.response.id`) and, when
the row's ids are known, the trace and span ids of the span the row came from, so a backend shows
the event on that span. `logs_request` is the OTLP/JSON form (ids as hex, as OTLP/JSON writes
them); `logs_protobuf` the same request as the OTLP/HTTP protobuf body (opentelemetry-proto).

Targets: `otlp:URL` (OTLP/HTTP; a URL without a path gets `/v1/logs`), `otlp` alone (the endpoint
from `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/logs`) and
`otlp-json:FILE` (the OTLP/JSON requests appended to FILE, one per line). The headers of
`OTEL_EXPORTER_OTLP_HEADERS` and `..._LOGS_HEADERS` are sent only to the endpoint those variables
name (or, when none is set, to the one OTLP endpoint the command line names).
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tlmscore.errors import ConfigError
from tlmscore.stores import openinference, otlp_logs
from tlmscore.stores._http import append_lines, call, sent
from tlmscore.stores.base import Annotation, FileStore, Keys, Sent, Session, Target

__all__ = ["CONNECTOR", "EVENT_NAME", "SCOPE", "OtlpConnector", "headers_of", "log_record", "logs_protobuf",
           "logs_request"]

EVENT_NAME = "gen_ai.evaluation.result"
SCOPE = "tlmscore"
KEYS = Keys(secrets=("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS"),
            servers=("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"))
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_SPAN_ID = re.compile(r"^[0-9a-f]{16}$")


def otel_id(value: str | None, pattern: re.Pattern[str]) -> str | None:
    """A trace or span id as lower-case hex, None when absent or not an OpenTelemetry id."""
    text = (value or "").strip().lower().removeprefix("0x").replace("-", "")
    return text if pattern.match(text) and set(text) != {"0"} else None


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
    trace_id, span_id = otel_id(annotation.trace_id, _TRACE_ID), otel_id(annotation.span_id, _SPAN_ID)
    if trace_id is not None:
        record["traceId"] = trace_id
        if span_id is not None:
            record["spanId"] = span_id
    return record


def logs_request(annotations: Sequence[Annotation], *, time_unix_nano: int, version: str = "") -> dict[str, Any]:
    """An OTLP/JSON `ExportLogsServiceRequest` holding one event per annotation."""
    return {"resourceLogs": [{
        "resource": {"attributes": [_attribute("service.name", "tlmscore")]},
        "scopeLogs": [{"scope": {"name": SCOPE, "version": version},
                       "logRecords": [log_record(a, time_unix_nano) for a in annotations]}],
    }]}


def logs_protobuf(request: dict[str, Any]) -> bytes:
    """The OTLP/JSON request (as `logs_request` makes it) as the OTLP/HTTP protobuf body.

    Protobuf's JSON mapping reads OTLP/JSON but for the ids: hex in OTLP/JSON, base64 in protobuf's.
    """
    from google.protobuf.json_format import ParseDict  # noqa: PLC0415  (only for a protobuf body)
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: PLC0415
        ExportLogsServiceRequest,
    )

    mapped = copy.deepcopy(request)
    for record in (r for res in mapped["resourceLogs"] for scope in res["scopeLogs"] for r in scope["logRecords"]):
        for key in ("traceId", "spanId"):
            if key in record:
                record[key] = base64.b64encode(bytes.fromhex(record[key])).decode("ascii")
    body: bytes = ParseDict(mapped, ExportLogsServiceRequest()).SerializeToString()
    return body


def headers_of(env: Mapping[str, str]) -> dict[str, str]:
    """Headers from `OTEL_EXPORTER_OTLP_HEADERS`, then `..._LOGS_HEADERS` (`key=value,key2=value2`, URL-encoded)."""
    headers: dict[str, str] = {}
    for name in KEYS.secrets:
        for item in env.get(name, "").split(","):
            key, sep, value = item.partition("=")
            if sep and key.strip():
                headers[unquote(key.strip())] = unquote(value.strip())
    return headers


def _logs_endpoint(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"annotation target {url!r}: expected an http(s) URL")
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/v1/logs"


class OtlpConnector(FileStore):
    """OpenTelemetry collectors and backends: GenAI spans in, evaluation events out."""

    name = "otlp"
    origins = ("otlp", "openinference")
    readers = (openinference.READER, otlp_logs.SPANS_READER, otlp_logs.LOGS_READER)
    """The files of OTLP collectors and backends: OpenInference span exports, OTLP traces, GenAI log events."""
    keys = KEYS
    batch_size = 512
    forms = ("otlp:URL", "otlp (OTEL_EXPORTER_OTLP_ENDPOINT)", "otlp-json:FILE")
    annotates = "span"

    def target(self, text: str, env: Mapping[str, str]) -> Target | None:
        """`otlp:URL`, `otlp` (the endpoint in the environment) or `otlp-json:FILE`."""
        scheme, sep, rest = text.partition(":")
        if scheme == "otlp-json" and sep and rest:
            return Target(self.name, text, rest, file=True)
        if scheme == "otlp" and sep and rest:
            location = _logs_endpoint(rest)
            return Target(self.name, f"otlp:{location}", location)
        if text != "otlp":
            return None
        if env.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
            location = env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"]
        elif env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            location = _logs_endpoint(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
        else:
            raise ConfigError("--to otlp: set OTEL_EXPORTER_OTLP_ENDPOINT (or _LOGS_ENDPOINT), or give otlp:URL")
        return Target(self.name, f"otlp:{location}", location)

    def headers(self, env: Mapping[str, str]) -> dict[str, str]:
        """The OTLP exporter's headers of the environment."""
        return headers_of(env)

    def payload(self, annotation: Annotation) -> Any | None:
        """Every row becomes an event (on its span when the row has OpenTelemetry ids)."""
        return annotation

    def send(self, target: Target, payloads: Sequence[Any], session: Session) -> Sent:
        """One export request for the batch: to the file, or POSTed as protobuf."""
        request = logs_request(payloads, time_unix_nano=session.time_unix_nano)
        if target.file:
            return append_lines(Path(target.location), [request], len(payloads))
        headers = {**target.headers, "Content-Type": "application/x-protobuf"}
        try:
            body = logs_protobuf(request)
        except ImportError:
            return Sent.failed(len(payloads), "OTLP/HTTP needs opentelemetry-proto: pip install opentelemetry-proto",
                               retry=False)
        reply = call(session.client, "POST", target.location, headers, session.timeout, content=body)
        return sent(reply, len(payloads))


CONNECTOR = OtlpConnector()
