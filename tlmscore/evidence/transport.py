"""The fetcher's network layer: httpx over plain asyncio sockets and streams.

httpx reaches the network through httpcore, whose default backend on asyncio goes through anyio:
a cancel scope per read, a lookup of the running async library per call, and a fresh table of
socket attributes every time the pool asks whether an idle keep-alive connection was closed by the
server (it asks once per idle connection for every request it places). Every millisecond the
event loop spends on a response delays the requests that follow it, so this module gives httpcore
a backend built on asyncio alone: a bare loop fetching the benchmark's 300 pages used 0.29 s of
CPU through anyio and 0.24 s on this backend.

The backend connects a socket itself and opens the asyncio stream on first use, as plain TCP or,
when httpcore asks for TLS, wrapped in TLS for the server name it gives; that keeps to public
asyncio API on every Python the project supports. Errors are mapped to httpcore's exceptions,
which httpx maps to its own, so callers see the same `httpx.ConnectError`, `httpx.ReadTimeout`
and so on as with the default backend.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

import httpcore
import httpx

from tlmscore.evidence.guard import parse_ip_literal

__all__ = ["AsyncioBackend", "AsyncioStream", "http_transport", "within"]

_T = TypeVar("_T")
_TIMEOUT_SCOPE = getattr(asyncio, "timeout", None)  # Python 3.11+
_TIMEOUTS = (TimeoutError, asyncio.TimeoutError)
SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


async def within(timeout: float | None, awaitable: Awaitable[_T]) -> _T:
    """Await `awaitable`, raising `TimeoutError` after `timeout` seconds (None: no limit)."""
    if timeout is None:
        return await awaitable
    if _TIMEOUT_SCOPE is not None:
        async with _TIMEOUT_SCOPE(timeout):  # no extra task, unlike wait_for
            return await awaitable
    return await asyncio.wait_for(awaitable, timeout)  # Python 3.10


class _Mapped:
    """Re-raise timeouts and socket errors as the httpcore exceptions httpx knows how to map."""

    __slots__ = ("_os_error", "_timeout_error")

    def __init__(self, timeout_error: type[Exception], os_error: type[Exception]) -> None:
        self._timeout_error = timeout_error
        self._os_error = os_error

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        if exc is None:
            return
        if isinstance(exc, _TIMEOUTS):  # before OSError: TimeoutError is one
            raise self._timeout_error(str(exc) or "timed out") from exc
        if isinstance(exc, OSError):  # ssl.SSLError included
            raise self._os_error(str(exc) or type(exc).__name__) from exc


_READ = _Mapped(httpcore.ReadTimeout, httpcore.ReadError)
_WRITE = _Mapped(httpcore.WriteTimeout, httpcore.WriteError)
_CONNECT = _Mapped(httpcore.ConnectTimeout, httpcore.ConnectError)


def _readable(sock: socket.socket | None) -> bool:
    """Whether a socket has something to read right now (a closed one counts as readable)."""
    if sock is None or sock.fileno() == -1:
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class AsyncioStream(httpcore.AsyncNetworkStream):
    """A connected TCP socket, read and written through an asyncio stream opened on first use.

    Opening lazily lets `start_tls` wrap the socket in TLS from the start, with no upgrade of a
    running transport.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _opened(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(sock=self._sock)
        return self._reader, self._writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Up to `max_bytes` received bytes; empty once the peer has closed the connection."""
        reader, _ = await self._opened()
        with _READ:
            return await within(timeout, reader.read(max_bytes))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Send all of `buffer`, waiting while the peer is slow to take it."""
        if not buffer:
            return
        _, writer = await self._opened()
        with _WRITE:
            writer.write(buffer)
            await within(timeout, writer.drain())

    async def aclose(self) -> None:
        """Close without waiting, so closing a pool of many connections takes no turns of the loop.

        A plain connection closes on the loop's next turn; a TLS one is dropped rather than left
        waiting for the peer's goodbye (as httpcore's own backends do).
        """
        writer, self._writer, self._reader = self._writer, None, None
        if writer is None:
            self._sock.close()
            return
        writer.close()
        if writer.get_extra_info("ssl_object") is not None:
            writer.transport.abort()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        """Wrap the connection in TLS for `server_hostname` (verified by `ssl_context`)."""
        if self._writer is not None:
            raise RuntimeError("TLS must start before anything is sent on the connection")
        try:
            with _CONNECT:
                self._reader, self._writer = await within(
                    timeout,
                    asyncio.open_connection(sock=self._sock, ssl=ssl_context, server_hostname=server_hostname),
                )
        except BaseException:
            self._sock.close()
            raise
        return self

    def get_extra_info(self, info: str) -> Any:
        """What httpcore asks of a stream; `is_readable` on an idle connection means it was closed."""
        if info == "is_readable":
            reader = self._reader
            if reader is not None and (reader.at_eof() or reader.exception() is not None):
                return True
            return _readable(self._sock)
        if info == "socket":
            return self._sock
        if self._writer is None:
            names = {"client_addr": self._sock.getsockname, "server_addr": self._sock.getpeername}
            return names[info]() if info in names else None
        keys = {"ssl_object": "ssl_object", "client_addr": "sockname", "server_addr": "peername"}
        return self._writer.get_extra_info(keys[info]) if info in keys else None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend on asyncio: TCP connections, TLS on request, no anyio."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """A stream on a new TCP connection to `host` (a name or an IP address) and `port`."""
        with _CONNECT:
            sock = await within(timeout, self._connect(host, port, local_address, list(socket_options or ())))
        return AsyncioStream(sock)

    async def sleep(self, seconds: float) -> None:
        """Wait, as httpcore asks between its own retries."""
        await asyncio.sleep(seconds)

    async def _connect(
        self, host: str, port: int, local_address: str | None, options: list[SocketOption]
    ) -> socket.socket:
        """Connect to the first address of `host` that accepts (an IP address is used as is)."""
        loop = asyncio.get_running_loop()
        literal = parse_ip_literal(host)
        targets: list[tuple[int, Any]]
        if literal is None:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            targets = [(family, address) for family, _, _, _, address in infos]
        else:
            version_family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET  # noqa: PLR2004
            targets = [(version_family, (str(literal), port))]
        failure: OSError = OSError(f"no address found for {host}")
        for family, address in targets:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                for option in options:
                    sock.setsockopt(*option)
                if local_address:
                    sock.bind((local_address, 0))
                await loop.sock_connect(sock, address)
            except OSError as exc:
                sock.close()
                failure = exc
            except BaseException:
                sock.close()
                raise
            else:
                return sock
        raise failure


def http_transport(limits: httpx.Limits, *, verify: ssl.SSLContext | bool = True) -> httpx.AsyncHTTPTransport:
    """An httpx transport like the default one (no proxies from the environment), on `AsyncioBackend`."""
    transport = httpx.AsyncHTTPTransport(verify=verify, limits=limits, trust_env=False)
    pool = transport._pool  # httpx offers no public way to choose httpcore's backend
    if not isinstance(pool, httpcore.AsyncConnectionPool):
        raise TypeError(f"unexpected httpx connection pool {type(pool).__name__}")
    pool._network_backend = AsyncioBackend()
    return transport
