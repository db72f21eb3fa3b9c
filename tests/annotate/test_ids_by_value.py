"""Trace and span ids by value, from the recorded file to the event written: OpenTelemetry spans.

Each recorded trace of `fixtures/traces/<instrumentation>/` (the Collector's OTLP/JSON file, the raw
OTLP/HTTP protobuf bodies, and those bodies in protobuf's JSON mapping, whose ids are base64) is
scored and written back to a local OTLP/HTTP receiver. The ids each span holds are read here with
`json` and `opentelemetry-proto` directly, not by tlmscore's reader: every event must carry the trace
and span id of the span that made the call it scores (the span whose `gen_ai.response.id` it names).
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers.otlp_receiver import OtlpReceiver, serve_otlp
from tests.support.paths import ROOT
from tlmscore.cli import main

pytest.importorskip("opentelemetry.proto", reason="the otel extra (opentelemetry-proto) is not installed")

TRACES = ROOT / "fixtures" / "traces"
INSTRUMENTATIONS = ("openai-v2", "traceloop", "logfire")


@dataclass(frozen=True)
class Span:
    """What a recorded span holds: its ids (hex) and the response id of its call (None when it names none)."""

    trace_id: str
    span_id: str
    response_id: str | None


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    yield from serve_otlp()


def _json_spans(path: Path) -> dict[str, Span]:
    """The spans of an OTLP/JSON lines file by span id; ids as the file writes them (hex, or base64)."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    values = {a["key"]: a["value"] for a in span.get("attributes", [])}
                    response = values.get("gen_ai.response.id", {}).get("stringValue")
                    ids = _hex(span["traceId"], 16), _hex(span["spanId"], 8)
                    found[ids[1]] = Span(ids[0], ids[1], response)
    return found


def _hex(value: str, size: int) -> str:
    return value if len(value) == 2 * size else base64.b64decode(value).hex()


def _body(path: Path) -> Any:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    data = path.read_bytes()
    return ExportTraceServiceRequest.FromString(gzip.decompress(data) if path.suffix == ".gz" else data)


def _protobuf_spans(paths: list[Path]) -> dict[str, Span]:
    found = {}
    for path in paths:
        for resource in _body(path).resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    values = {a.key: a.value.string_value for a in span.attributes}
                    found[span.span_id.hex()] = Span(span.trace_id.hex(), span.span_id.hex(),
                                                     values.get("gen_ai.response.id"))
    return found


def _events(receiver: OtlpReceiver) -> list[tuple[str, str, dict[str, Any]]]:
    """(trace id, span id, attributes) of every event received."""
    return [(r.trace_id.hex(), r.span_id.hex(),
             {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in r.attributes}) for r in receiver.records]


def _score_and_annotate(inputs: list[Path], receiver: OtlpReceiver, tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "scored.jsonl"
    assert main(["score", *map(str, inputs), "-o", str(out), "--offline", "--quiet", "--cache-dir",
                 str(tmp_path / "cache"), "--annotate", f"otlp:{receiver.url}"]) == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def _check(spans: dict[str, Span], rows: list[dict[str, Any]], receiver: OtlpReceiver) -> None:
    """One event per row, each on the trace and span of the call it scores, as the recording holds them."""
    events = _events(receiver)
    assert len(events) == len(rows) > 0
    by_response = {s.response_id: s for s in spans.values() if s.response_id}
    named = 0
    for trace_id, span_id, attributes in events:
        span = spans[span_id]  # a span the recording holds...
        assert trace_id == span.trace_id  # ...on its own trace
        assert attributes["tlmscore.record.id"] == span_id
        response = attributes.get("gen_ai.response.id")
        if span.response_id is not None:
            assert response == span.response_id
        if response in by_response:
            assert by_response[response].span_id == span_id  # the call's own span, not another of its trace
            named += 1
    assert named >= len(events) // 2  # most spans name their call's response; those tie event and call
    assert len({span_id for _, span_id, _ in events}) == len(events)


@pytest.mark.parametrize("name", INSTRUMENTATIONS)
def test_the_collector_files_ids_reach_the_events(name: str, receiver: OtlpReceiver, tmp_path: Path) -> None:
    path = TRACES / name / "traces.jsonl"
    rows = _score_and_annotate([path], receiver, tmp_path)
    _check(_json_spans(path), rows, receiver)


@pytest.mark.parametrize("name", ["openai-v2", "logfire"])
def test_the_protobuf_bodies_ids_reach_the_events(name: str, receiver: OtlpReceiver, tmp_path: Path) -> None:
    bodies = sorted((TRACES / name / "bodies").iterdir())
    rows = _score_and_annotate(bodies, receiver, tmp_path)
    _check(_protobuf_spans(bodies), rows, receiver)


def test_base64_ids_of_protobufs_json_mapping_reach_the_events(receiver: OtlpReceiver, tmp_path: Path) -> None:
    from google.protobuf.json_format import MessageToDict

    bodies = sorted((TRACES / "openai-v2" / "bodies").iterdir())
    mapped = tmp_path / "mapped.jsonl"
    mapped.write_text("".join(json.dumps(MessageToDict(_body(b))) + "\n" for b in bodies), encoding="utf-8")
    first = json.loads(mapped.read_text(encoding="utf-8").splitlines()[0])["resourceSpans"][0]["scopeSpans"][0]
    assert len(first["spans"][0]["traceId"]) == 24  # base64 of 16 bytes, not hex
    rows = _score_and_annotate([mapped], receiver, tmp_path)
    _check(_protobuf_spans(bodies), rows, receiver)
    assert _json_spans(mapped) == _protobuf_spans(bodies)
