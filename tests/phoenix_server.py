"""A real Phoenix server for tests: `phoenix serve` on free loopback ports, in a temporary folder.

`phoenix_server` (a module-scoped fixture; import it into a test module) starts the server with
its own `PHOENIX_WORKING_DIR` and telemetry off, waits until it answers, and stops it after the
module's tests. `send_spans` installs the real OpenInference instrumentation of the `openai`
client for the length of a block, exporting its spans to the server over OTLP/HTTP.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

START_TIMEOUT = 600.0  # seconds; the first start imports and migrates a lot on a shared two-core machine


@dataclass(frozen=True)
class PhoenixServer:
    """A running server: its base URL and `phoenix://` address prefix."""

    url: str
    address: str
    working_dir: Path


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
        time.sleep(0.5)
    raise RuntimeError(f"phoenix serve did not answer within {START_TIMEOUT:.0f} s: {log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def phoenix_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    pytest.importorskip("phoenix.server.main", reason="the phoenix extra is not installed: pip install -e '.[phoenix]'")
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_TELEMETRY_ENABLED": "false",
           "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc)}
    log = work / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "phoenix.server.main", "serve"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, proc, log)
        yield PhoenixServer(url, f"phoenix://127.0.0.1:{port}", work)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def send_spans(url: str, project: str) -> Iterator[None]:
    """The `openai` client instrumented by OpenInference, its spans sent to `url`'s project as they end."""
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{url}/v1/traces")))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        provider.force_flush()
        provider.shutdown()


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
