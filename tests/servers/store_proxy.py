"""A reverse proxy on 127.0.0.1 in front of a real trace store, for the tests: it counts and can break.

Every request is passed on to `upstream` as it came and the answer passed back, so the client
talks to the real server; the proxy records each request (`seen`: method and path) and, for span
listings, the span ids each page held (`spans_served`). `before(method, path)` runs first and may
answer in the server's place (a status code) or act (kill the server mid-write, say); when the
server cannot be reached the proxy answers 502, as a gateway does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import httpx

Hook = Callable[[str, str], int | None]
"""`before(method, path)`: a status code to answer instead of the server, or None to pass the request on."""


class StoreProxy:
    """Start with `with StoreProxy("http://127.0.0.1:6006") as proxy:`; `proxy.url` is its base URL."""

    def __init__(self, upstream: str, before: Hook | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.before = before
        self.seen: list[tuple[str, str]] = []
        self.keys: list[str | None] = []
        self.spans_served: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StoreProxy:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def clear(self) -> None:
        with self._lock:
            self.seen.clear()
            self.keys.clear()
            self.spans_served.clear()

    def _note(self, method: str, path: str, status: int, body: bytes, key: str | None) -> None:
        with self._lock:
            self.seen.append((method, path))
            self.keys.append(key)
            if method == "GET" and path.split("?", maxsplit=1)[0].endswith("/spans") and status == 200:
                data: Any = json.loads(body).get("data") or []
                self.spans_served.extend(span["context"]["span_id"] for span in data)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _pass(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                forced = proxy.before(self.command, self.path) if proxy.before else None
                if forced is not None:
                    self._answer(forced, b"{}", {"Content-Type": "application/json"})
                    proxy._note(self.command, self.path, forced, b"{}", self.headers.get("Authorization"))
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                try:
                    reply = httpx.request(self.command, proxy.upstream + self.path, headers=headers, content=body,
                                          timeout=120)
                except httpx.HTTPError:
                    self._answer(502, b"{}", {"Content-Type": "application/json"})
                    proxy._note(self.command, self.path, 502, b"{}", self.headers.get("Authorization"))
                    return
                kept = {k: v for k, v in reply.headers.items()
                        if k.lower() not in ("content-length", "transfer-encoding", "content-encoding", "connection")}
                self._answer(reply.status_code, reply.content, kept)
                key = self.headers.get("Authorization")
                proxy._note(self.command, self.path, reply.status_code, reply.content, key)

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _pass  # noqa: N815  (the names http.server calls)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's signature)
                return

        return Handler
