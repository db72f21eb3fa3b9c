"""A local stand-in for Langfuse's and LangSmith's ingestion endpoints, on 127.0.0.1, for the source tests.

No Langfuse or LangSmith server can run here, so this one captures what their SDKs send:
`POST /api/public/otel/v1/traces` (the Langfuse SDK's OTLP/HTTP protobuf, gzip or not) decoded into
spans as OTLP/JSON dicts; `GET /info` answers as a LangSmith server that takes JSON batches
(`use_multipart_endpoint: false`), and `POST /runs/batch` collects the runs' `post` and `patch`
operations. `headers` keeps every request's headers (the keys the SDKs sent as credentials).
"""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.servers.judge_server import LoopbackServer

LANGSMITH_INFO = {"version": "0.0.0-test", "batch_ingest_config": {
    "use_multipart_endpoint": False, "size_limit": 100, "size_limit_bytes": 20_971_520,
    "scale_up_qsize_trigger": 1000, "scale_up_nthreads_limit": 16, "scale_down_nempty_trigger": 4}}


def otlp_spans(body: bytes) -> list[dict[str, Any]]:
    """The spans of an OTLP/HTTP protobuf body as OTLP/JSON dicts (ids as protobuf's base64)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    data = MessageToDict(request)
    return [span for resource in data.get("resourceSpans") or [] for scope in resource.get("scopeSpans") or []
            for span in scope.get("spans") or []]


class TraceStoreServer(LoopbackServer):
    """The server; `root` is the address to give both SDKs as their host / endpoint."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.run_posts: list[dict[str, Any]] = []
        self.run_patches: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.unknown: list[str] = []
        self._lock = threading.Lock()
        super().__init__(self._handler())

    @property
    def root(self) -> str:
        """The base address, without a path."""
        return self.url.removesuffix("/v1")

    def _take(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        with self._lock:
            self.headers.append(headers)
            if path == "/api/public/otel/v1/traces":
                raw = gzip.decompress(body) if headers.get("Content-Encoding") == "gzip" else body
                self.spans.extend(otlp_spans(raw))
                return 200, b""
            if path == "/runs/batch":
                batch = json.loads(body)
                self.run_posts.extend(batch.get("post") or [])
                self.run_patches.extend(batch.get("patch") or [])
                return 200, b"{}"
            self.unknown.append(path)
            return 404, b'{"detail": "not found"}'

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's name)
                """Keep test output quiet."""

            def do_GET(self) -> None:
                if self.path.split("?")[0] == "/info":
                    self._send(200, json.dumps(LANGSMITH_INFO).encode())
                else:
                    with server._lock:
                        server.unknown.append(self.path)
                    self._send(404, b'{"detail": "not found"}')

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send(*server._take(self.path.split("?")[0], dict(self.headers.items()), body))

            def _send(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
