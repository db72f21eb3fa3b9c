"""The fetcher's network layer: httpx on httpcore's own connection pool, with the guard in `connect_tcp`.

httpx chooses httpcore's network backend itself and offers no public way to pass one, while
httpcore's pools take `network_backend=` as a public argument. So `GuardedTransport` is a small
`httpx.AsyncBaseTransport` (httpx's documented extension point) over `httpcore.AsyncConnectionPool`
with `GuardedBackend`: a wrapper around httpcore's own backend that, for every new connection,
resolves the host once, refuses it unless every address passes the address guard, connects to
those addresses in turn (the next one when a connection is refused or times out) and checks that
the socket is connected to one of them. The pool is keyed by origin (scheme, host, port) as httpx
keys it, TLS is verified for the host name, and connections are kept alive, https included: a
pooled connection only ever reached an address that was checked for that name, and a name whose
DNS answer later turns private is refused the next time a connection is made for it.

Each origin has a pool of its own (`_Origins`): httpcore's pool walks every connection it holds,
several times over, whenever a request starts or a response is closed, so one pool for a batch on
dozens of servers spent more CPU on that bookkeeping than on TLS. A pool with nothing in flight is
closed once unused for the keep-alive time, and the least recently used are closed while the idle
connections of all number more than the transport keeps. TLS contexts are made on first use.

Behind a proxy the proxy makes the connection, so the guard cannot see where it goes: requests that
go through a proxy use httpcore's backend as is, and the fetcher refuses what it can still see
(see `Fetcher`). Proxies come from `Settings.proxy`, or from the environment (`HTTPS_PROXY`,
`HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`) only when `Settings.trust_env` is set.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import sys
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import certifi
import httpcore
import httpx

from tlmscore.errors import ConfigError, FetchError
from tlmscore.evidence._guard import Resolver, parse_ip_literal, vet_host
from tlmscore.settings import Settings

_T = TypeVar("_T")
_TIMEOUT_SCOPE = getattr(asyncio, "timeout", None)  # Python 3.11+
ADDRESSES_TRIED = 3
"""The addresses of a host a connection is tried on, in the resolver's order."""
_KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept, as httpx's default limits keep it
# Authorities' bundles for when OpenSSL's default paths hold none (where `truststore` looks, in order).
_CA_FILES = (
    "/etc/ssl/cert.pem",  # Alpine, Arch, Fedora 34-43, OpenWRT, RHEL 9-10, BSD
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  # Fedora 44+, RHEL 11+
    "/etc/pki/tls/cert.pem",  # older Fedora, RHEL, CentOS
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu
    "/etc/ssl/ca-bundle.pem",  # SUSE
)
_HASHED_NAME = re.compile(r"^[0-9a-fA-F]{8}\.[0-9]$")
SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


async def within(timeout: float | None, awaitable: Awaitable[_T]) -> _T:
    """Await `awaitable`, raising `TimeoutError` after `timeout` seconds (None: no limit)."""
    if timeout is None:
        return await awaitable
    if _TIMEOUT_SCOPE is not None:
        async with _TIMEOUT_SCOPE(timeout):  # no extra task, unlike wait_for
            return await awaitable
    return await asyncio.wait_for(awaitable, timeout)  # Python 3.10


@contextmanager
def _httpx_errors() -> Iterator[None]:
    """Re-raise httpcore's exceptions as the httpx ones (as httpx's own transport does).

    httpx names each of its transport errors as httpcore names the one it stands for, so the most
    specific of httpcore's classes that `exc` is an instance of names the httpx one.
    """
    try:
        yield
    except Exception as exc:
        mapped = next((getattr(httpx, kind.__name__) for kind in type(exc).__mro__
                       if getattr(httpcore, kind.__name__, None) is kind and hasattr(httpx, kind.__name__)), None)
        if mapped is None:
            raise
        raise mapped(str(exc)) from exc


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses the guard accepts for the host."""

    def __init__(
        self, allow_hosts: Collection[str], resolver: Resolver, inner: httpcore.AsyncNetworkBackend | None = None
    ) -> None:
        self._allow_hosts = allow_hosts
        self._resolver = resolver
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """A stream to the first checked address of `host` that accepts within `timeout`.

        Raises `FetchError` (`blocked`, `dns_error`) when the guard refuses the host.
        """
        addresses = await vet_host(host, port, allow_hosts=self._allow_hosts, resolver=self._resolver)
        options = list(socket_options or ())
        failure: Exception = httpcore.ConnectError(f"no address found for {host}")
        for address in addresses[:ADDRESSES_TRIED]:
            try:
                stream = await self._inner.connect_tcp(address, port, timeout, local_address, options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:  # e.g. no IPv6 route here
                failure = exc
                continue
            self._check_peer(stream, host, addresses)
            return stream
        raise failure

    @staticmethod
    def _check_peer(stream: httpcore.AsyncNetworkStream, host: str, addresses: tuple[str, ...]) -> None:
        """Refuse a connection whose peer is not one of the checked addresses."""
        peer = stream.get_extra_info("server_addr")
        ip = parse_ip_literal(str(peer[0]).split("%", 1)[0]) if peer else None
        if ip is None or str(ip) not in addresses:
            raise FetchError("blocked", f"refused: the connection for {host} reached {ip}, which was not checked")

    async def sleep(self, seconds: float) -> None:
        """Wait, as httpcore asks between its own retries."""
        await self._inner.sleep(seconds)


class _ResponseStream(httpx.AsyncByteStream):
    """httpcore's response body as an httpx stream, with its errors mapped.

    `origin`, when given, is told once when the response is closed.
    """

    def __init__(self, stream: AsyncIterable[bytes] | Iterable[bytes], origin: _Origin | None = None) -> None:
        assert isinstance(stream, AsyncIterable)  # noqa: S101 -- an async pool's responses stream asynchronously
        self._stream = stream
        self._origin = origin

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        origin, self._origin = self._origin, None
        try:
            closing = getattr(self._stream, "aclose", None)
            if closing is not None:
                await closing()
        finally:
            if origin is not None:
                origin.finished()


@dataclass
class _Origin:
    """One origin's connection pool, its requests in flight and when it was last used (loop time)."""

    pool: httpcore.AsyncConnectionPool
    in_flight: int = 0
    used: float = 0.0

    def started(self) -> None:
        self.in_flight += 1
        self.used = asyncio.get_running_loop().time()

    def finished(self) -> None:
        self.in_flight -= 1
        self.used = asyncio.get_running_loop().time()


class _Origins:
    """A connection pool per origin (scheme, host, port), made on first use.

    Pools with nothing in flight are closed when unused for `_KEEPALIVE_EXPIRY`, and, least recently
    used first, while their connections number more than `keep`; each pool keeps at most
    `per_origin` idle connections (the requests in flight to one host are limited to that many).
    """

    def __init__(self, make: Callable[[bytes, int], httpcore.AsyncConnectionPool], keep: int, per_origin: int) -> None:
        self._make = make
        self._keep = keep
        self._per_origin = per_origin
        self._pools: OrderedDict[tuple[bytes, bytes, int | None], _Origin] = OrderedDict()

    async def started(self, url: httpx.URL) -> _Origin:
        """The origin of `url`, counted as having one more request in flight."""
        key = (url.raw_scheme, url.raw_host, url.port)
        origin = self._pools.get(key)
        if origin is None:
            origin = self._pools[key] = _Origin(self._make(url.raw_scheme, self._per_origin))
        self._pools.move_to_end(key)
        origin.started()
        try:
            for pool in self._surplus():
                await pool.aclose()
        except BaseException:  # e.g. the page's deadline while closing: the request is not sent
            origin.finished()
            raise
        return origin

    def _surplus(self) -> list[httpcore.AsyncConnectionPool]:
        """Remove and return the pools to close: expired, then least recently used beyond `keep`."""
        now = asyncio.get_running_loop().time()
        quiet = [(key, origin) for key, origin in self._pools.items() if origin.in_flight == 0]
        kept = sum(len(origin.pool.connections) for _, origin in quiet)
        surplus = []
        for key, origin in quiet:  # least recently used first
            if kept <= self._keep and now - origin.used < _KEEPALIVE_EXPIRY:
                break
            kept -= len(origin.pool.connections)
            surplus.append(self._pools.pop(key).pool)
        return surplus

    async def aclose(self) -> None:
        """Close every pool."""
        origins, self._pools = list(self._pools.values()), OrderedDict()
        for origin in origins:
            await origin.pool.aclose()


def _bypassed(host: str, no_proxy: str) -> bool:
    """Tell whether `NO_PROXY` (comma-separated names, `.suffix`es or `*`) exempts `host`."""
    host = host.lower().rstrip(".")
    for entry in (part.strip().lower().lstrip(".").rstrip(".") for part in no_proxy.split(",")):
        if entry == "*" or (entry and (host == entry or host.endswith("." + entry))):
            return True
    return False


class GuardedTransport(httpx.AsyncBaseTransport):
    """Requests through one guarded connection pool, or through a proxy's pool when one applies.

    `proxies` maps a scheme (`http`, `https`, `all`) to a proxy URL and `no` to a `NO_PROXY` list;
    `backend` is the network backend the guard wraps (httpcore's own when None); `ssl_context` what
    certificates are verified with (else `tls_context(settings)`, made when first needed).
    """

    def __init__(
        self, settings: Settings, resolver: Resolver, *, ssl_context: ssl.SSLContext | None = None,
        proxies: dict[str, str] | None = None, backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        # The fetcher's slots bound the requests in flight; the pools only keep idle connections, enough
        # for one per server when a batch spans more servers than that, as long as httpx keeps them.
        self._settings = settings
        self._ssl_context = ssl_context
        self._keep = 2 * settings.concurrency
        guarded = GuardedBackend(settings.allow_hosts, resolver, backend)
        self._direct = _Origins(
            lambda scheme, idle: httpcore.AsyncConnectionPool(
                ssl_context=self._tls() if scheme == b"https" else None, max_connections=None,
                max_keepalive_connections=idle, keepalive_expiry=_KEEPALIVE_EXPIRY, network_backend=guarded),
            keep=self._keep, per_origin=settings.per_host)
        self._proxies = proxies or {}
        self._proxy_pools = {
            url: self._proxy_pool(url, self._tls())
            for url in dict.fromkeys(u for scheme, u in self._proxies.items() if scheme in ("http", "https", "all"))
        }

    def _tls(self) -> ssl.SSLContext:
        """The run's TLS context, made on first use."""
        self._ssl_context = self._ssl_context or tls_context(self._settings)
        return self._ssl_context

    def _proxy_pool(self, url: str, ssl_context: ssl.SSLContext) -> httpcore.AsyncHTTPProxy:
        """A pool of connections through the proxy at `url` (CONNECT tunnels for https)."""
        proxy = httpx.Proxy(url)
        if proxy.url.scheme not in ("http", "https"):
            raise ConfigError(f"only http and https proxies are supported, not {url!r}")
        return httpcore.AsyncHTTPProxy(
            proxy_url=httpcore.URL(scheme=proxy.url.raw_scheme, host=proxy.url.raw_host, port=proxy.url.port,
                                   target=proxy.url.raw_path),
            proxy_auth=proxy.raw_auth, proxy_headers=proxy.headers.raw, ssl_context=ssl_context,
            max_connections=None, max_keepalive_connections=self._keep, keepalive_expiry=_KEEPALIVE_EXPIRY)

    def proxy_for(self, url: httpx.URL) -> str | None:
        """The proxy a request for `url` goes through, or None when it connects directly."""
        chosen = self._proxies.get(url.scheme) or self._proxies.get("all")
        if chosen is None or _bypassed(url.host, self._proxies.get("no", "")):
            return None
        return chosen

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request` through the pool for its URL; the body is streamed, not read."""
        proxy = self.proxy_for(request.url)
        url = request.url
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        origin: _Origin | None = None
        if proxy is None:
            origin = await self._direct.started(url)
            pool: httpcore.AsyncConnectionPool = origin.pool
        else:
            pool = self._proxy_pools[proxy]
        try:
            with _httpx_errors():
                response = await pool.handle_async_request(core_request)
        except BaseException:
            if origin is not None:
                origin.finished()
            raise
        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_ResponseStream(response.stream, origin),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        """Close every pool and its connections."""
        await self._direct.aclose()
        for pool in self._proxy_pools.values():
            await pool.aclose()


def tls_context(settings: Settings) -> ssl.SSLContext:
    """The TLS context certificates are verified with: `ca_bundle`, else the chosen trust store.

    Made once per run. `system` is the operating system's store (what TLS-intercepting corporate
    networks install their authority into); `certifi` is Mozilla's list as shipped with httpx.
    """
    if settings.ca_bundle is not None:
        return ssl.create_default_context(cafile=str(settings.ca_bundle))
    if settings.trust_store == "system":
        return _system_context()
    return ssl.create_default_context(cafile=certifi.where())


def _system_context() -> ssl.SSLContext:
    """The operating system's store: on macOS and Windows its own verifier, through `truststore`.

    Elsewhere the system's store is OpenSSL's default files, which `truststore` loads again for
    every connection (20-45 ms of CPU each here); they are loaded once instead, from the same
    places: OpenSSL's defaults (`SSL_CERT_FILE`, `SSL_CERT_DIR` honoured), else the first bundle
    of `_CA_FILES` that exists.
    """
    if sys.platform in ("darwin", "win32"):
        import truststore  # noqa: PLC0415 -- loaded only when the platform's verifier is used

        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context = ssl.create_default_context()  # OpenSSL's default verify paths, loaded now
    defaults = ssl.get_default_verify_paths()
    if not (defaults.cafile or _holds_certificates(defaults.capath)):
        bundle = next((path for path in _CA_FILES if Path(path).is_file()), None)
        if bundle is not None:
            context.load_verify_locations(cafile=bundle)
    return context


def _holds_certificates(folder: str | None) -> bool:
    """Tell whether `folder` holds certificates under OpenSSL's hashed names (`1a2b3c4d.0`)."""
    if not folder or not Path(folder).is_dir():
        return False
    return any(_HASHED_NAME.match(entry.name) for entry in Path(folder).iterdir())
