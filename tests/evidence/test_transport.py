"""The guarded transport (httpx on httpcore's pool and backend) against real sockets on 127.0.0.x."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest
import trustme

from tests.evidence.test_fetch import table_resolver
from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tlmscore.errors import ConfigError, FetchError
from tlmscore.evidence._guard import Resolver
from tlmscore.evidence._transport import GuardedTransport
from tlmscore.settings import Settings

PAGE = html_page("Ferry news", "The ferry to the island now runs every twenty minutes in summer.")
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi"
PUBLIC = "93.184.215.14"  # a public address; only the routing backend below ever "connects" to it


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


class RoutingBackend(httpcore.AsyncNetworkBackend):
    """A network that routes `PUBLIC` to 127.0.0.1, as address translation would; records each address.

    The stream it gives reports the address that was asked for as its peer, as a translated
    connection does, and every address it is asked to connect to is kept in `asked`.
    """

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()
        self.asked: list[str] = []

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.asked.append(host)
        stream = await self._inner.connect_tcp("127.0.0.1" if host == PUBLIC else host, port, timeout)
        return _Translated(stream, (host, port))

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Translated(httpcore.AsyncNetworkStream):
    def __init__(self, stream: httpcore.AsyncNetworkStream, peer: tuple[str, int]) -> None:
        self._stream = stream
        self._peer = peer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    def get_extra_info(self, info: str) -> Any:
        return self._peer if info == "server_addr" else self._stream.get_extra_info(info)


def transport(
    allow: Sequence[str] = ("127.0.0.1",), resolver: Resolver | None = None, *,
    backend: httpcore.AsyncNetworkBackend | None = None, trust: trustme.CA | None = None, concurrency: int = 32,
) -> GuardedTransport:
    context = ssl.create_default_context()
    if trust is not None:
        trust.configure_trust(context)
    settings = Settings(allow_hosts=frozenset(allow), cache_dir=Path("unused"), concurrency=concurrency)
    return GuardedTransport(settings, resolver or table_resolver({}), ssl_context=context, backend=backend)


def get(urls: Sequence[str], guarded: GuardedTransport, *, timeout: float = 2.0) -> list[httpx.Response]:
    """GET each of `urls` in turn through one client on `guarded`, bodies read."""

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=guarded, timeout=timeout) as client:
            return [await client.get(url) for url in urls]

    return asyncio.run(run())


@pytest.fixture
def stuck_listener() -> Iterator[tuple[str, int]]:
    """A listener on 127.0.0.2 whose backlog is full, so connecting to it times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.2", 0))
    listener.listen(0)
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(listener.getsockname())
        fillers.append(filler)
    yield listener.getsockname()
    for sock in (*fillers, listener):
        sock.close()


def test_requests_on_one_connection_are_kept_alive() -> None:
    with RawServer(ANSWER) as server:
        url = f"http://127.0.0.1:{server.port}/"
        assert [r.status_code for r in get([url] * 3, transport())] == [200, 200, 200]
    assert server.connections == 1


def test_each_origin_keeps_its_connection_between_requests_to_other_origins() -> None:
    with RawServer(ANSWER) as a, RawServer(ANSWER) as b, RawServer(ANSWER) as c:
        urls = [f"http://127.0.0.1:{server.port}/" for server in (a, b, c)]
        assert [r.status_code for r in get(urls * 3, transport())] == [200] * 9
    assert [a.connections, b.connections, c.connections] == [1, 1, 1]


def test_idle_origins_beyond_the_keep_are_closed_least_recently_used_first() -> None:
    """Concurrency 1 keeps 2 idle connections: a fourth origin closes the first one's, and an
    origin used again in between keeps its own."""
    with RawServer(ANSWER) as a, RawServer(ANSWER) as b, RawServer(ANSWER) as c, RawServer(ANSWER) as d:
        url = {server: f"http://127.0.0.1:{server.port}/" for server in (a, b, c, d)}
        order = [url[a], url[b], url[c], url[d], url[c], url[a]]
        assert [r.status_code for r in get(order, transport(concurrency=1))] == [200] * 6
    assert [a.connections, b.connections, c.connections, d.connections] == [2, 1, 1, 1]


def test_a_connection_the_server_closed_is_not_reused() -> None:
    async def run(server: RawServer) -> list[int]:
        statuses = []
        async with httpx.AsyncClient(transport=transport(), timeout=2.0) as client:
            for _ in range(3):
                statuses.append((await client.get(f"http://127.0.0.1:{server.port}/")).status_code)
                assert await asyncio.to_thread(server.closed.acquire, timeout=5)  # closed before the next
        return statuses

    with RawServer(ANSWER, close_after_reply=True) as server:
        assert asyncio.run(run(server)) == [200, 200, 200]
    assert server.connections == 3


def test_a_server_that_never_answers_is_a_read_timeout() -> None:
    with RawServer(None) as server, pytest.raises(httpx.ReadTimeout):
        get([f"http://127.0.0.1:{server.port}/"], transport(), timeout=1.0)


def test_a_refused_connection_is_a_connect_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        get([f"http://127.0.0.1:{port}/"], transport())


def test_a_server_closing_mid_answer_is_a_protocol_error() -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part"
    with RawServer(cut, close_after_reply=True) as server, pytest.raises(httpx.RemoteProtocolError):
        get([f"http://127.0.0.1:{server.port}/"], transport())


def test_the_guard_refuses_a_loopback_connection_of_a_host_not_allowed() -> None:
    with RawServer(ANSWER) as server, pytest.raises(FetchError, match="loopback"):
        get([f"http://127.0.0.1:{server.port}/"], transport(allow=()))
    assert server.connections == 0


def test_a_dns_answer_that_turns_to_loopback_is_refused_on_the_next_connection() -> None:
    """DNS rebinding: a name first resolves to a public address, then to loopback. Every new
    connection resolves once and connects to what was checked, so the loopback server never sees a
    request for the name, and the network is only ever asked for the checked public address."""
    answers = iter([[PUBLIC], ["127.0.0.1"], ["127.0.0.1"]])
    asked: list[str] = []

    async def flipping(host: str, port: int) -> Sequence[str]:
        asked.append(host)
        return next(answers)

    routing = RoutingBackend()
    with RawServer(ANSWER, close_after_reply=True) as server:
        url = f"http://rebind.test:{server.port}/"
        guarded = transport(allow=(), resolver=flipping, backend=routing)
        assert [r.status_code for r in get([url], guarded)] == [200]
        with pytest.raises(FetchError, match=r"rebind\.test resolves to 127\.0\.0\.1, which is a loopback"):
            get([url], transport(allow=(), resolver=flipping, backend=routing))
    assert server.connections == 1  # the translated public connection, and nothing else
    assert routing.asked == [PUBLIC]
    assert asked == ["rebind.test", "rebind.test"]


def test_a_connection_that_reaches_an_address_not_checked_is_refused() -> None:
    class Misrouting(RoutingBackend):
        async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
            stream = await self._inner.connect_tcp("127.0.0.1", port)
            return _Translated(stream, ("127.0.0.9", port))

    with RawServer(ANSWER) as server, pytest.raises(FetchError, match=r"reached 127\.0\.0\.9, which was not checked"):
        get([f"http://127.0.0.1:{server.port}/"], transport(backend=Misrouting()))


def test_connect_falls_back_to_the_next_address_when_one_is_refused() -> None:
    with RawServer(ANSWER) as server:
        resolver = table_resolver({"dual.test": ["127.0.0.2", "127.0.0.1"]})  # nothing listens on .2
        guarded = transport(allow=("dual.test",), resolver=resolver)
        assert [r.status_code for r in get([f"http://dual.test:{server.port}/"], guarded)] == [200]
    assert server.connections == 1


def test_connect_falls_back_to_the_next_address_after_a_connect_timeout(stuck_listener: tuple[str, int]) -> None:
    stuck_host, port = stuck_listener
    # The working server must share the stuck listener's port: one on 127.0.0.1, answered by hand.
    with socket.create_server(("127.0.0.1", port)) as alive:
        alive.settimeout(5)
        resolver = table_resolver({"dual.test": [stuck_host, "127.0.0.1"]})
        guarded = transport(allow=("dual.test",), resolver=resolver)

        async def run() -> str:
            timeout = httpx.Timeout(5.0, connect=0.3)
            async with httpx.AsyncClient(transport=guarded, timeout=timeout) as client:
                sending = asyncio.ensure_future(client.get(f"http://dual.test:{port}/"))
                conn, _ = await asyncio.to_thread(alive.accept)
                with conn:
                    await asyncio.to_thread(conn.recv, 65536)
                    conn.sendall(ANSWER)
                    return (await sending).text

        assert asyncio.run(run()) == "hi"


def test_https_is_verified_for_the_host_name(tls_server: EvidenceServer, authority: trustme.CA) -> None:
    url = tls_server.route("/1", Reply(body=PAGE)).replace("127.0.0.1", "a.test")
    guarded = transport(allow=("a.test",), resolver=table_resolver({"a.test": ["127.0.0.1"]}), trust=authority)
    assert "twenty minutes" in get([url], guarded)[0].text
    assert tls_server.server_names == ["a.test"]


def test_tls_to_a_server_with_an_unknown_authority_is_a_connect_error(tls_server: EvidenceServer) -> None:
    tls_server.route("/1", Reply(body=PAGE))
    with pytest.raises(httpx.ConnectError, match="certificate"):
        get([f"https://127.0.0.1:{tls_server.port}/1"], transport())
    assert tls_server.count() == 0


def test_a_proxy_other_than_http_is_a_configuration_error() -> None:
    settings = Settings(cache_dir=Path("unused"))
    with pytest.raises(ConfigError, match="only http and https proxies"):
        GuardedTransport(settings, table_resolver({}), ssl_context=ssl.create_default_context(),
                         proxies={"https": "socks5://127.0.0.1:1080"})


@pytest.mark.parametrize(("no_proxy", "bypassed"), [("a.test", True), (".test", True), ("*", True),
                                                     ("b.test, sub.a.test", False), ("", False)])
def test_no_proxy_exempts_names_and_their_subdomains(no_proxy: str, bypassed: bool) -> None:
    settings = Settings(cache_dir=Path("unused"))
    guarded = GuardedTransport(settings, table_resolver({}), ssl_context=ssl.create_default_context(),
                               proxies={"http": "http://127.0.0.1:3128", "no": no_proxy})
    assert guarded.proxy_for(httpx.URL("http://a.test/page")) == (None if bypassed else "http://127.0.0.1:3128")
