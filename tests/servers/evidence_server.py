"""A real HTTP server on 127.0.0.1 for the evidence tests, with scripted replies and counters.

Each path is given a list of `Reply` values served in turn (the last one repeats), so a test can
script "503, then 200". The server counts requests per path, keeps the headers it saw and the
largest number of requests in flight at once (arrived and not yet answered: a client cannot have
finished such a request), which is how tests check retries, caching and concurrency limits
without patching anything in the code under test. Instead of sleeping, a reply can be held until a
number of requests are in flight together (`hold`) or until the test opens a gate (`gate`), so
that what a test sees does not depend on how fast the machine is.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


@dataclass(frozen=True)
class Reply:
    """One scripted response."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drip: float = 0.0
    chunk: int = 65536
    send_length: bool = True
    hold: int = 0
    """Held until this many held requests are in flight together, then let go together (for at most
    `HOLD_LIMIT` seconds: a client that never sends that many fails its test instead of hanging)."""
    gate: threading.Event | None = field(default=None, compare=False)
    """Held until the test sets this event (for at most `HOLD_LIMIT` seconds)."""


HOLD_LIMIT = 60.0


def html_page(title: str, *paragraphs: str) -> bytes:
    """An article page trafilatura extracts: a title and paragraphs of text."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body><nav><a href='/'>Home</a></nav><article><h1>{title}</h1>{body}</article>"
        "<footer>Footer</footer></body></html>"
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        self.server.connected()
        super().setup()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.disconnected()

    def do_GET(self) -> None:
        reply, group = self.server.enter(self.path, dict(self.headers.items()))
        try:
            self._serve(reply, group)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _serve(self, reply: Reply, group: int) -> None:
        try:
            time.sleep(reply.delay)
            self.server.wait_for_group(group)
            if reply.gate is not None:
                reply.gate.wait(HOLD_LIMIT)
        finally:
            self.server.leave()  # before any byte is sent, so the client still holds its slot
        self.send_response(reply.status)
        if reply.content_type is not None:
            self.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.send_length:
            self.send_header("Content-Length", str(len(reply.body)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        for start in range(0, len(reply.body), reply.chunk):
            self.wfile.write(reply.body[start : start + reply.chunk])
            self.wfile.flush()
            if reply.drip:
                time.sleep(reply.drip)
        self.server.completed(self.path)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 -- the stdlib's name
        """Keep test output clean."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tls = tls
        self.connections = 0
        self.open_connections = 0
        self.max_open_connections = 0
        self.server_names: list[str | None] = []
        if tls is not None:
            tls.sni_callback = self._server_name
        self.lock = threading.Lock()
        self.routes: dict[str, list[Reply]] = {}
        self.counts: Counter[str] = Counter()
        self.arrivals: list[tuple[str, float]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies_sent: Counter[str] = Counter()
        self.released = threading.Condition(self.lock)
        self.held = 0
        self.groups_let_go = 0

    def enter(self, path: str, headers: dict[str, str]) -> tuple[Reply, int]:
        """Count a request that has arrived and pick its reply; it is in flight until `leave`.

        With the reply, the number of the group it waits for (`wait_for_group`; -1: none)."""
        with self.lock:
            self.counts[path] += 1
            self.arrivals.append((path, time.monotonic()))
            self.headers.append(headers)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            replies = self.routes.get(path)
            if not replies:
                return Reply(404, b"not found", "text/plain"), -1
            reply = replies.pop(0) if len(replies) > 1 else replies[0]
            if not reply.hold:
                return reply, -1
            group = self.groups_let_go
            self.held += 1
            if self.held >= reply.hold:  # the group is complete: let it go
                self.held = 0
                self.groups_let_go += 1
                self.released.notify_all()
            return reply, group

    def wait_for_group(self, group: int) -> None:
        """Wait until held group number `group` has been let go (at most `HOLD_LIMIT` seconds)."""
        if group < 0:
            return
        with self.lock:
            self.released.wait_for(lambda: self.groups_let_go > group, HOLD_LIMIT)

    def completed(self, path: str) -> None:
        """Count a reply whose body was sent in full."""
        with self.lock:
            self.bodies_sent[path] += 1

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def connected(self) -> None:
        with self.lock:
            self.connections += 1
            self.open_connections += 1
            self.max_open_connections = max(self.max_open_connections, self.open_connections)

    def disconnected(self) -> None:
        with self.lock:
            self.open_connections -= 1

    def _server_name(self, _tls: ssl.SSLObject, name: str | None, _context: ssl.SSLContext) -> None:
        with self.lock:
            self.server_names.append(name)

    def finish_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        """Serve one connection, after a TLS handshake (in this connection's thread) for https."""
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)

    def handle_error(self, request: object, client_address: object) -> None:
        """Connections the client dropped on purpose are not errors here."""


class EvidenceServer:
    """Start with `with EvidenceServer() as server:`; stops (and frees its port) on exit.

    With `tls` (a server-side context) it speaks https, and records the server name each
    handshake asked for.
    """

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._server = _Server(tls)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self.port = self._server.server_address[1]

    def __enter__(self) -> EvidenceServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def route(self, path: str, *replies: Reply) -> str:
        """Serve `replies` in turn at `path`; return its URL on 127.0.0.1."""
        with self._server.lock:
            self._server.routes[path] = list(replies)
        return self.url(path)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        scheme = "https" if self._server.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    @property
    def connections(self) -> int:
        """Connections accepted so far (several requests may share one)."""
        with self._server.lock:
            return self._server.connections

    @property
    def max_open_connections(self) -> int:
        """The most connections that were open at once."""
        with self._server.lock:
            return self._server.max_open_connections

    @property
    def server_names(self) -> list[str | None]:
        """The TLS server name (SNI) of each handshake, in order."""
        with self._server.lock:
            return list(self._server.server_names)

    def count(self, path: str | None = None) -> int:
        """Requests served at `path`, or in total."""
        with self._server.lock:
            counts = self._server.counts
            return counts[path] if path is not None else sum(counts.values())

    def arrivals(self, path: str) -> list[float]:
        """When requests for `path` arrived (`time.monotonic()`), in order."""
        with self._server.lock:
            return [when for seen, when in self._server.arrivals if seen == path]

    @property
    def max_in_flight(self) -> int:
        with self._server.lock:
            return self._server.max_in_flight

    def bodies_sent(self, path: str) -> int:
        """Replies at `path` whose body was sent to the end."""
        with self._server.lock:
            return self._server.bodies_sent[path]

    @property
    def seen_headers(self) -> list[dict[str, str]]:
        with self._server.lock:
            return list(self._server.headers)
