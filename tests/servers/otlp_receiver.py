"""A local OTLP/HTTP logs receiver for tests: decodes each request body with `opentelemetry-proto`.

`OtlpReceiver.records` are the log records received (decoded protobuf), `headers` the request
headers; `fail_next` makes the next N requests answer 503 (to test retries); while `gate` is set to an
unset event, each request after the first `hold_after` waits for it (a slow store).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)


@dataclass
class OtlpReceiver:
    """What the receiver saw; `url` is its base address (no path)."""

    url: str = ""
    requests: int = 0
    records: list[Any] = field(default_factory=list)
    resources: list[Any] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    fail_next: int = 0
    gate: threading.Event | None = None
    hold_after: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(state: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with state.lock:
                state.requests += 1
                held = state.requests > state.hold_after
            if state.gate is not None and held:
                state.gate.wait(10)
            with state.lock:
                if state.fail_next > 0:
                    state.fail_next -= 1
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                ok = self.path == "/v1/logs" and self.headers.get("Content-Type") == "application/x-protobuf"
                if ok:
                    request = ExportLogsServiceRequest()
                    request.ParseFromString(body)
                    state.headers.append(dict(self.headers.items()))
                    for resource in request.resource_logs:
                        state.resources.append(resource.resource)
                        for scope in resource.scope_logs:
                            state.records.extend(scope.log_records)
            reply = ExportLogsServiceResponse().SerializeToString() if ok else b""
            self.send_response(200 if ok else 400)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- the base class's signature
            return

    return Handler


def serve_otlp() -> Iterator[OtlpReceiver]:
    """Run a receiver on a free loopback port for as long as the generator is open."""
    state = OtlpReceiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
