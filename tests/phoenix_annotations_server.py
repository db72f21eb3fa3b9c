"""A real Phoenix server for the write-back tests (`phoenix serve`, from the `phoenix` extra).

It runs on free loopback ports with a temporary `PHOENIX_WORKING_DIR` and telemetry off, and is
stopped (its process only) when the fixture closes. `send_spans` puts LLM spans into it through
its own OTLP/HTTP endpoint, so the spans annotated are spans Phoenix ingested.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

PROJECT = "tlmscore-tests"
START_TIMEOUT = 300.0  # seconds; starting Phoenix takes a minute or more on a busy machine


@dataclass(frozen=True)
class PhoenixServer:
    """A running server: its base URL."""

    url: str


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _text(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def send_spans(server: PhoenixServer, spans: Sequence[tuple[str, str, str]]) -> None:
    """Send LLM spans `(trace_id, span_id, name)` (hex ids) to the server's OTLP/HTTP endpoint."""
    now = time.time_ns()
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[_text("openinference.project.name", PROJECT)]),
        scope_spans=[ScopeSpans(spans=[
            Span(trace_id=bytes.fromhex(trace), span_id=bytes.fromhex(span), name=name, kind=Span.SPAN_KIND_INTERNAL,
                 start_time_unix_nano=now, end_time_unix_nano=now + 1_000_000,
                 attributes=[_text("openinference.span.kind", "LLM")])
            for trace, span, name in spans])])])
    reply = httpx.post(f"{server.url}/v1/traces", content=request.SerializeToString(),
                       headers={"Content-Type": "application/x-protobuf"}, timeout=30)
    reply.raise_for_status()


def serve_phoenix(working_dir: Path) -> Iterator[PhoenixServer]:
    """Start `phoenix serve`, wait for /healthz, yield; then stop that process."""
    port, grpc = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(working_dir), "PHOENIX_TELEMETRY_ENABLED": "false",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_HOST": "127.0.0.1"}
    phoenix = shutil.which("phoenix", path=str(Path(sys.executable).parent)) or "phoenix"
    log = (working_dir / "server.log").open("wb")
    process = subprocess.Popen([phoenix, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    server = PhoenixServer(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"phoenix serve exited: {(working_dir / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("phoenix serve did not start in time")
            time.sleep(1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
