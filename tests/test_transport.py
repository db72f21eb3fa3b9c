"""The fetcher's network backend (httpx over plain asyncio) against real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from pathlib import Path

import httpcore
import httpx
import pytest
import trustme

from tests.evidence_server import EvidenceServer, Reply, html_page
from tests.test_fetch import table_resolver
from tlmscore.evidence.fetch import Fetcher
from tlmscore.evidence.transport import AsyncioBackend, http_transport
from tlmscore.settings import Settings

PAGE = html_page("Ferry news", "The ferry to the island now runs every twenty minutes in summer.")
LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=8)
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi"


class RawServer:
    """A TCP server on 127.0.0.1 that answers each request with `reply` (or nothing), in a thread.

    With `close_after_reply` it closes a connection after each answer although the answer
    promised to keep it open, as servers that time out idle connections do.
    """

    def __init__(self, reply: bytes | None, *, close_after_reply: bool = False) -> None:
        self._reply = reply
        self._close = close_after_reply
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self.connections = 0
        self.closed = threading.Semaphore(0)  # released each time a reply's connection is closed
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> RawServer:
        accepting = threading.Thread(target=self._accept)
        accepting.start()
        self._threads.append(accepting)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.connections += 1
            serving = threading.Thread(target=self._serve, args=(conn,))
            serving.start()
            self._threads.append(serving)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.05)
        with conn:
            while not self._stop.is_set():
                try:
                    request = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not request:
                    return
                if self._reply is not None:
                    conn.sendall(self._reply)
                    if self._close:
                        conn.close()
                        self.closed.release()
                        return


def get(url: str, *, timeout: float = 2.0, verify: ssl.SSLContext | bool = True, times: int = 1) -> list[int]:
    """GET `url` `times` times, one after another, through one client on the asyncio backend."""

    async def run() -> list[int]:
        async with httpx.AsyncClient(transport=http_transport(LIMITS, verify=verify), timeout=timeout) as client:
            return [(await client.get(url)).status_code for _ in range(times)]

    return asyncio.run(run())


def test_the_transport_runs_on_the_asyncio_backend() -> None:
    transport = http_transport(LIMITS)
    pool = transport._pool
    assert isinstance(pool, httpcore.AsyncConnectionPool)
    assert isinstance(pool._network_backend, AsyncioBackend)


def test_requests_on_one_connection_are_kept_alive() -> None:
    with RawServer(ANSWER) as server:
        assert get(f"http://127.0.0.1:{server.port}/", times=3) == [200, 200, 200]
    assert server.connections == 1


def test_a_connection_the_server_closed_is_not_reused() -> None:
    """An idle connection the server closed reads as readable, so the pool opens a new one."""

    async def run(server: RawServer) -> list[int]:
        statuses = []
        async with httpx.AsyncClient(transport=http_transport(LIMITS), timeout=2.0) as client:
            for _ in range(3):
                statuses.append((await client.get(f"http://127.0.0.1:{server.port}/")).status_code)
                assert await asyncio.to_thread(server.closed.acquire, timeout=5)  # closed before the next
        return statuses

    with RawServer(ANSWER, close_after_reply=True) as server:
        assert asyncio.run(run(server)) == [200, 200, 200]
    assert server.connections == 3


def test_a_server_that_never_answers_is_a_read_timeout() -> None:
    with RawServer(None) as server, pytest.raises(httpx.ReadTimeout):
        get(f"http://127.0.0.1:{server.port}/", timeout=0.2)


def test_a_refused_connection_is_a_connect_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        get(f"http://127.0.0.1:{port}/")


def test_a_host_name_is_resolved_before_connecting() -> None:
    with RawServer(ANSWER) as server:
        assert get(f"http://localhost:{server.port}/") == [200]


def test_a_server_closing_mid_answer_is_a_protocol_error() -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part"
    with RawServer(cut, close_after_reply=True) as server, pytest.raises(httpx.RemoteProtocolError):
        get(f"http://127.0.0.1:{server.port}/")


def test_tls_is_verified_for_the_name_the_fetcher_gives(
    tmp_path: Path, tls_server: EvidenceServer, authority: trustme.CA
) -> None:
    """Through the backend, the handshake names the URL's host and checks its certificate."""
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    url = tls_server.route("/1", Reply(body=PAGE)).replace("127.0.0.1", "a.test")
    settings = Settings(cache_dir=tmp_path / "cache", allow_hosts=frozenset({"a.test"}), retries=0,
                        extract_workers=1)

    async def run() -> str | None:
        client = httpx.AsyncClient(transport=http_transport(LIMITS, verify=trusting))
        async with client, Fetcher(settings, client=client, resolver=table_resolver({"a.test": ["127.0.0.1"]})) as f:
            page = (await f.pages([url]))[url]
            return page.text

    assert "twenty minutes" in (asyncio.run(run()) or "")
    assert tls_server.server_names == ["a.test"]


def test_tls_to_a_server_with_an_unknown_authority_is_a_connect_error(tls_server: EvidenceServer) -> None:
    tls_server.route("/1", Reply(body=PAGE))
    with pytest.raises(httpx.ConnectError, match="certificate"):
        get(f"https://127.0.0.1:{tls_server.port}/1")
    assert tls_server.count() == 0
