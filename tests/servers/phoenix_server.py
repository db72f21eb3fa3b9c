"""A real Phoenix server for tests: `phoenix serve` on free loopback ports, in a temporary folder.

`PhoenixProcess` starts the server with its own `PHOENIX_WORKING_DIR` and telemetry off, waits
until it answers, kills it as a crash would, starts it again on the same ports and database, and
stops that process (only it); `serve_phoenix` and the module-scoped fixture `phoenix_server` start
one for a block. Spans get into it two ways, both through its own OTLP/HTTP endpoint, so the spans
read or annotated are spans Phoenix ingested: `send_spans` installs the real OpenInference
instrumentation of the `openai` client for the length of a block (its spans exported in batches,
all of them by the end of the block); `send_llm_spans` sends bare LLM spans with given ids.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

PROJECT = "tlmscore-tests"
"""The project `send_llm_spans` sends to."""
START_TIMEOUT = 600.0  # seconds; the first start imports and migrates a lot on a shared two-core machine


@dataclass(frozen=True)
class PhoenixServer:
    """A running server: its base URL."""

    url: str

    @property
    def address(self) -> str:
        """The `phoenix://HOST:PORT` prefix of a project address."""
        return "phoenix://" + self.url.removeprefix("http://")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"phoenix serve exited with {proc.returncode}: {log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.5)  # polls the server's own health check, bounded by START_TIMEOUT
    raise RuntimeError(f"phoenix serve did not answer within {START_TIMEOUT:.0f} s: {log.read_text()[-3000:]}")


class PhoenixProcess:
    """`phoenix serve` in `working_dir` on fixed loopback ports: started, killed (as a crash would) and
    started again on the same ports and database."""

    def __init__(self, working_dir: Path) -> None:
        self.working_dir = working_dir
        self.port, self.grpc = _free_port(), _free_port()
        self.server = PhoenixServer(f"http://127.0.0.1:{self.port}")
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PhoenixServer:
        """Start the server and wait until it answers."""
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(self.working_dir), "PHOENIX_TELEMETRY_ENABLED": "false",
               "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(self.port), "PHOENIX_GRPC_PORT": str(self.grpc)}
        log = self.working_dir / "server.log"
        with log.open("ab") as out:
            self._proc = subprocess.Popen([sys.executable, "-m", "phoenix.server.main", "serve"], env=env,
                                          stdout=out, stderr=subprocess.STDOUT)
        _wait_up(self.server.url, self._proc, log)
        return self.server

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash or an OOM kill would."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()

    def stop(self) -> None:
        """Stop the server (this process only)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def serve_phoenix(working_dir: Path) -> Iterator[PhoenixServer]:
    """Start `phoenix serve` in `working_dir`, wait for /healthz, yield it; then stop that process."""
    process = PhoenixProcess(working_dir)
    try:
        yield process.start()
    finally:
        process.stop()


@pytest.fixture(scope="module", name="phoenix")
def phoenix_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixProcess]:
    """A `phoenix serve` of its own for a test module, which may stop and start it (`phoenix`)."""
    process = PhoenixProcess(tmp_path_factory.mktemp("phoenix"))
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def phoenix_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    pytest.importorskip("phoenix.server.main", reason="the phoenix extra is not installed: pip install -e '.[phoenix]'")
    yield from serve_phoenix(tmp_path_factory.mktemp("phoenix"))


@contextlib.contextmanager
def send_spans(url: str, project: str) -> Iterator[None]:
    """The `openai` client instrumented by OpenInference, its spans sent to `url`'s project as they end."""
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{url}/v1/traces")))  # flushed on exit
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        provider.force_flush()
        provider.shutdown()


def send_llm_spans(server: PhoenixServer, spans: Sequence[tuple[str, str, str]]) -> None:
    """Send LLM spans `(trace_id, span_id, name)` (hex ids) to `PROJECT` on the server, as OTLP/HTTP protobuf."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def text(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    now = time.time_ns()
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[text("openinference.project.name", PROJECT)]),
        scope_spans=[ScopeSpans(spans=[
            Span(trace_id=bytes.fromhex(trace), span_id=bytes.fromhex(span), name=name, kind=Span.SPAN_KIND_INTERNAL,
                 start_time_unix_nano=now, end_time_unix_nano=now + 1_000_000,
                 attributes=[text("openinference.span.kind", "LLM")])
            for trace, span, name in spans])])])
    reply = httpx.post(f"{server.url}/v1/traces", content=request.SerializeToString(),
                       headers={"Content-Type": "application/x-protobuf"}, timeout=30)
    reply.raise_for_status()


def wait_for_spans(url: str, project: str, count: int, timeout: float = 120.0) -> None:
    """Wait until the project holds `count` LLM spans (the server ingests them in the background)."""
    from phoenix.client import Client

    client = Client(base_url=url)
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            seen = len(client.spans.get_spans(project_identifier=project, span_kind="LLM", limit=count + 10))
            if seen >= count:
                return
        time.sleep(0.5)
    raise RuntimeError(f"{project}: {seen} of {count} spans arrived within {timeout:.0f} s")
