"""A forward proxy on 127.0.0.1 for the tests: CONNECT tunnels for https, absolute-form GET for http.

It resolves names with its own table (as a corporate proxy resolves names the client cannot) and
records the request line of everything it was asked, so a test can tell what went through it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class ProxyServer:
    """Start with `with ProxyServer({"a.test": "127.0.0.1"}) as proxy:`; stops on exit."""

    def __init__(self, names: dict[str, str]) -> None:
        self._names = names
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._seen: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> ProxyServer:
        self._start(self._accept)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        for thread in list(self._threads):
            thread.join(timeout=5)
        self._listener.close()

    @property
    def seen(self) -> list[str]:
        """The request line of each request the proxy was asked, in order."""
        with self._lock:
            return list(self._seen)

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(5)
            self._start(self._serve, conn)

    def _upstream(self, authority: str) -> socket.socket:
        host, _, port = authority.rpartition(":")
        return socket.create_connection((self._names.get(host, host), int(port)), timeout=5)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            reader = conn.makefile("rb")
            while not self._stop.is_set():
                head = _read_head(reader)
                if head is None:
                    return
                line = head[0].decode("latin-1")
                with self._lock:
                    self._seen.append(line)
                method, target, _ = line.split(" ", 2)
                if method == "CONNECT":
                    self._tunnel(conn, reader, target)
                    return
                self._forward(conn, target, head[1:])

    def _tunnel(self, conn: socket.socket, reader: object, authority: str) -> None:
        with self._upstream(authority) as upstream:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self._start(_pipe, upstream, conn)
            _pipe(conn, upstream)

    def _forward(self, conn: socket.socket, target: str, headers: list[bytes]) -> None:
        """Send an absolute-form GET on to the server in origin form and relay its whole answer."""
        rest = target.split("://", 1)[1]
        authority, _, path = rest.partition("/")
        kept = [h for h in headers if not h.lower().startswith((b"connection:", b"proxy-"))]
        request = b"\r\n".join([f"GET /{path} HTTP/1.1".encode(), *kept, b"Connection: close", b"", b""])
        with self._upstream(authority if ":" in authority else f"{authority}:80") as upstream:
            upstream.sendall(request)
            while chunk := upstream.recv(65536):
                conn.sendall(chunk)


def _read_head(reader: object) -> list[bytes] | None:
    """The request line and header lines of the next request, or None at the end of the connection."""
    lines: list[bytes] = []
    while True:
        line = reader.readline()  # type: ignore[attr-defined]
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines if lines else None
        lines.append(line.rstrip(b"\r\n"))


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes from `source` to `sink` until either side closes."""
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
