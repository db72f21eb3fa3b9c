"""The fetcher's request side: one client, the concurrency limits, and each page's request loop.

`Downloader.download(url, ...)` follows `url` to a final reply: redirects followed by hand so the
address guard checks every hop, bounded retries (connection failures, 429 and 5xx, honouring
`Retry-After`), all under one deadline per page (`Settings.timeout`, from the page's first
request) that covers connecting, redirects, retries and the waits between them; a `Retry-After`
that ends past it is not waited for. At most `Settings.concurrency` requests are in flight, and
`Settings.per_host` per host (`Slots`). A free slot goes to the host with the most requests
waiting: a batch's biggest site, whose pages can only go `per_host` at a time, is the longest
chain of requests, so it is never left waiting behind small sites' requests (first come, first
served, it lost its place at every request and finished last).

The fetcher's own client checks addresses where connections are made (`transport.GuardedBackend`),
so connections are pooled by origin and kept alive, https included, and DNS rebinding between
check and connect fails; only the URL's form is checked before sending. Behind a proxy, which
connects for us, each hop's host is also resolved here and refused if it resolves to an address
the guard refuses. A caller's own client (`client=`) has no such backend: each request then goes
to an address checked here, with the `Host` header and TLS server name of the URL, on a
connection of its own for https; redirects are never followed by that client
(`follow_redirects=False` on every send).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
import urllib.request
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import TypeVar

import httpx

from tlmscore._urls import canonical_url, host_of
from tlmscore.errors import FetchError
from tlmscore.evidence._guard import Resolver, Target, check_url, check_url_form
from tlmscore.evidence._reply import Reply, read_reply, seconds
from tlmscore.evidence._transport import ADDRESSES_TRIED, GuardedTransport, within
from tlmscore.settings import Settings

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_RETRYABLE = (httpx.NetworkError, httpx.RemoteProtocolError)
_FIRST_BACKOFF = 0.5
_T = TypeVar("_T")


async def as_done(work: Iterable[Awaitable[_T]]) -> AsyncGenerator[_T, None]:
    """The results of `work`, run at once, each as it is done; what is not done is cancelled when the stream closes."""
    tasks = [asyncio.ensure_future(one) for one in work]
    try:
        for done in asyncio.as_completed(tasks):
            yield await done
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Deadline:
    """One page's time limit, counted from its first request."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._end: float | None = None

    def start(self) -> None:
        """Start counting, at the first request (later calls change nothing)."""
        if self._end is None:
            self._end = asyncio.get_running_loop().time() + self.limit

    def remaining(self) -> float:
        """Seconds left (all of them before the start)."""
        if self._end is None:
            return self.limit
        return max(0.0, self._end - asyncio.get_running_loop().time())


@dataclass
class _Host:
    """One host's requests: in flight, and waiting for a slot (first come, first served)."""

    in_flight: int = 0
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)
    turn: int = 0  # when it was last served (or first asked): orders hosts with as many waiting


class Slots:
    """At most `total` requests in flight and `per_host` to one host, the busiest host served first.

    A free slot goes to the host with the most requests waiting (ties: the one served least
    recently), and within a host to its requests in turn. Slots are handed out in a callback on
    the next turn of the event loop, not as each request asks, so the requests a batch starts
    together are all counted before the first is sent. Hosts that may take a request are kept in
    a heap by (waiting, turn); an entry that no longer matches its host's state is dropped as it
    comes up.
    """

    def __init__(self, total: int, per_host: int) -> None:
        self._total = total
        self._per_host = per_host
        self._in_flight = 0
        self._hosts: dict[str, _Host] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._turns = itertools.count(1)
        self._scheduled = False

    @asynccontextmanager
    async def slot(self, host: str) -> AsyncIterator[None]:
        """Hold a slot for one request to `host`."""
        state = self._hosts.setdefault(host, _Host())
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not state.waiting:
            state.turn = next(self._turns)
        state.waiting.append(granted)
        self._offer(host, state)
        try:
            await granted
        except BaseException:
            if granted.cancelled() or not granted.done():
                if granted in state.waiting:
                    state.waiting.remove(granted)
                    self._offer(host, state)
            else:  # granted just as the request was cancelled: give the slot back
                self._release(host, state)
            raise
        try:
            yield
        finally:
            self._release(host, state)

    def _release(self, host: str, state: _Host) -> None:
        state.in_flight -= 1
        self._in_flight -= 1
        self._offer(host, state)

    def _offer(self, host: str, state: _Host) -> None:
        """Note that `host` may take a request (when it may), and hand slots out on the next turn."""
        if state.waiting and state.in_flight < self._per_host:
            heapq.heappush(self._heap, (-len(state.waiting), state.turn, host))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._hand_out)

    def _hand_out(self) -> None:
        """Give free slots to waiting requests, the host with the most waiting first."""
        self._scheduled = False
        while self._in_flight < self._total and self._heap:
            waiting, turn, host = heapq.heappop(self._heap)
            state = self._hosts[host]
            if -waiting != len(state.waiting) or turn != state.turn or state.in_flight >= self._per_host:
                continue  # stale: the host's state changed since this entry was made
            granted = state.waiting.popleft()
            state.turn = next(self._turns)
            if not granted.cancelled():
                state.in_flight += 1
                self._in_flight += 1
                granted.set_result(None)
            if state.waiting and state.in_flight < self._per_host:
                heapq.heappush(self._heap, (-len(state.waiting), state.turn, host))


ReadReply = Callable[[str, httpx.Response], Awaitable[Reply]]
"""Turns a response (body not read yet) for the URL into a `Reply`."""


class Downloader:
    """One client and connection pool, the concurrency limits, and the request loop of each page.

    `client` is a caller's own `httpx.AsyncClient`, used as given and left open; without one a
    client on a `GuardedTransport` is made at the first request and closed by `aclose`. `resolver`
    maps a host to its addresses. `read` turns each response into a `Reply` (`read_reply` unless
    given); `on_send` is called before each request is sent.
    """

    def __init__(
        self, settings: Settings, resolver: Resolver, *, client: httpx.AsyncClient | None, headers: dict[str, str],
        read: ReadReply | None = None, on_send: Callable[[], None] = lambda: None,
    ) -> None:
        self._settings = settings
        self._read: ReadReply = read or (lambda url, response: read_reply(url, response, settings))
        self._on_send = on_send
        self._resolver = resolver
        self._given_client = client
        self._headers = headers
        self._client: httpx.AsyncClient | None = None
        self._transport: GuardedTransport | None = None
        self._slots = Slots(settings.concurrency, settings.per_host)

    async def aclose(self) -> None:
        """Close the client made here (a caller's client is left open)."""
        client, self._client = self._client, None
        if client is not None and client is not self._given_client:
            await client.aclose()

    async def download(self, url: str) -> Reply:
        """Follow `url` to a final reply, retrying connection failures, 429 and 5xx with backoff.

        Everything runs under one deadline; a wait that would end past it is not started.
        """
        deadline = Deadline(self._settings.timeout)
        for attempt in range(self._settings.retries + 1):
            last = attempt == self._settings.retries
            try:
                reply = await self._follow(url, deadline)
            except _RETRYABLE:
                wait = self._backoff(attempt, None)
                if last or wait >= deadline.remaining():
                    raise
                await asyncio.sleep(wait)
                continue
            if reply.http_status not in _RETRY_STATUSES or last:
                return reply
            wait = self._backoff(attempt, reply.retry_after)
            if wait >= deadline.remaining():
                asked = seconds(reply.retry_after if reply.retry_after is not None else wait)
                past = f"asked to retry after {asked}, past the page's limit of {seconds(deadline.limit)}"
                return replace(reply, reason=f"{reply.reason} ({past})".lstrip())
            await asyncio.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before the next try: `Retry-After` if given, else exponential with jitter; capped."""
        if retry_after is None:
            jitter = 0.5 + random.random() / 2  # noqa: S311 -- spreads retries, not a secret
            retry_after = _FIRST_BACKOFF * 2**attempt * jitter
        return min(retry_after, self._settings.retry_after_cap)

    async def _follow(self, url: str, deadline: Deadline) -> Reply:
        """Request `url` and follow redirects by hand, checking every hop with the guard."""
        seen = {canonical_url(url)}
        current = url
        for _ in range(self._settings.max_redirects + 1):
            reply = await self._hop(current, deadline)
            if reply.location is None:
                return reply
            current = str(httpx.URL(current).join(reply.location))
            if canonical_url(current) in seen:
                raise FetchError("redirect_loop", f"redirect loop: {current} was already visited")
            seen.add(canonical_url(current))
        raise FetchError("redirect_loop", f"more than {self._settings.max_redirects} redirects")

    async def _hop(self, url: str, deadline: Deadline) -> Reply:
        """One request under the concurrency limits and the page's deadline: check, send, read."""
        async with self._slots.slot(host_of(url)):
            deadline.start()
            return await within(deadline.remaining(), self._exchange(url))

    async def _exchange(self, url: str) -> Reply:
        """Check `url`, send one GET and read the reply within the size cap."""
        client = await self._http()
        target = await self._checked(url)
        self._on_send()
        if self._transport is None:
            response = await self._send_pinned(client, target)
        else:
            response = await client.send(client.build_request("GET", target.url), stream=True, follow_redirects=False)
        try:
            return await self._read(str(target.url), response)
        finally:
            await response.aclose()

    async def _checked(self, url: str) -> Target:
        """Check what can be checked of `url` before sending it, as the route it takes allows.

        Through the fetcher's own transport the connection is checked as it is made, so only the
        URL's form is checked here; behind a proxy the host is also resolved here (and passes when
        it does not resolve: the proxy resolves names itself); a caller's client gets the address.
        """
        allow = self._settings.allow_hosts
        if self._transport is None:
            return await check_url(url, allow_hosts=allow, resolver=self._resolver)
        target = check_url_form(url, allow_hosts=allow)
        if self._transport.proxy_for(target.url) is None:
            return target
        return await check_url(url, allow_hosts=allow, resolver=self._resolver, unresolved_ok=True)

    @staticmethod
    async def _send_pinned(client: httpx.AsyncClient, target: Target) -> httpx.Response:
        """Send the request through a caller's client to the first checked address that accepts."""
        # The caller's pool keys a connection by the checked address alone. A plain connection
        # carries no name, so any request to that address may reuse it; a TLS connection was
        # verified for one name and must never serve another, so https connections are closed.
        headers = target.request_headers()
        if target.url.scheme == "https":
            headers["Connection"] = "close"
        refused: httpx.ConnectError | None = None
        for address in target.addresses[:ADDRESSES_TRIED]:
            request = client.build_request(
                "GET", target.request_url(address), headers=headers, extensions=target.request_extensions()
            )
            try:
                return await client.send(request, stream=True, follow_redirects=False)
            except httpx.ConnectError as exc:  # e.g. an IPv6 address on a host without IPv6
                refused = exc
        assert refused is not None  # noqa: S101 -- a target always has an address
        raise refused

    async def _http(self) -> httpx.AsyncClient:
        """Return the client requests go through: the one given, or one made here."""
        if self._client is None:
            self._client = self._given_client if self._given_client is not None else self._new_client()
        return self._client

    def _new_client(self) -> httpx.AsyncClient:
        """The fetcher's own client, on a guarded transport."""
        settings = self._settings
        if settings.proxy is not None:
            proxies = {"http": settings.proxy, "https": settings.proxy}
        else:
            # the proxies the environment names (`HTTPS_PROXY`, `NO_PROXY`, ...), as `urllib` reads them
            proxies = urllib.request.getproxies() if settings.trust_env else {}
        self._transport = GuardedTransport(settings, self._resolver, proxies=proxies)
        return httpx.AsyncClient(
            headers=self._headers,
            timeout=httpx.Timeout(settings.timeout, connect=settings.connect_timeout),
            transport=self._transport,
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            follow_redirects=False,
            trust_env=False,
        )
