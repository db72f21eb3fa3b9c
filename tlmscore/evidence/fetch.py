"""The fetcher: the only stage that touches the network.

`Fetcher.pages(urls)` gives one `Page` per URL. Each distinct page (by `url_key`) is looked up in
the cache, and what is missing is fetched in parallel under a global and a per-host concurrency
limit, with bounded retries (connection failures, 429 and 5xx, honouring `Retry-After`) and
redirects followed by hand so the address guard checks every hop. One deadline (`Settings.timeout`,
from the page's first request) covers connecting, redirects, retries and the waits between them;
a `Retry-After` that ends past it is not waited for. Bodies are streamed under a size cap, then
handed to worker processes for extraction while other pages are still downloading.

Every failure is mapped here, at the boundary, to a page status with a short sentence saying what
happened; nothing raises for a bad URL. The fetcher's own client checks addresses where connections
are made (`transport.GuardedBackend`), so connections are pooled by origin and kept alive, https
included, and DNS rebinding between check and connect fails. Behind a proxy, which connects for
us, each hop's host is resolved here and refused if it resolves to an address the guard refuses.
A caller's own client (`client=`) has no such backend: each request then goes to an address
checked here, with the `Host` header and TLS server name of the URL, on a connection of its own
for https; redirects are never followed by that client (`follow_redirects=False` on every send).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, replace
from http.cookiejar import CookieJar, DefaultCookiePolicy
from types import TracebackType
from typing import TypeVar, cast
from urllib.parse import urlsplit

import httpx

from tlmscore.errors import FetchError
from tlmscore.evidence.cache import CachedPage, PageCache
from tlmscore.evidence.extract import EXTRACTOR_VERSION, ExtractPool, media_type, supported_type
from tlmscore.evidence.guard import Resolver, Target, check_url, check_url_form, system_resolver
from tlmscore.evidence.page import PAGE_STATUSES, Page, PageStatus, in_given_order
from tlmscore.evidence.plan import plan_urls
from tlmscore.evidence.transport import GuardedTransport, environment_proxies, tls_context, within
from tlmscore.retry_after import retry_after_seconds
from tlmscore.settings import Settings
from tlmscore.urls import canonical_url, url_key

__all__ = ["ACCEPT", "USER_AGENT", "Fetcher", "Progress"]

USER_AGENT = "tlmscore/0.1 (+https://github.com/tlmscore/tlmscore)"
ACCEPT = (
    "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8"
    ",application/json;q=0.8,*/*;q=0.1"
)
_T = TypeVar("_T")
Progress = Callable[[str, int, int], None]
"""Called as `progress(stage, done, total)` each time a page is done; the CLI draws bars from it."""

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_RETRYABLE = (httpx.NetworkError, httpx.RemoteProtocolError)
_BAD_URL = (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError, UnicodeError)
_FAILURES = (FetchError, httpx.HTTPError, OSError, asyncio.TimeoutError, *_BAD_URL)
_FIRST_BACKOFF = 0.5
_ADDRESSES_TRIED = 3
_REASONS = {
    "offline_miss": "not in the cache, and offline mode never fetches",
    "empty": "no readable text found in the page",
}


@dataclass(frozen=True)
class _Reply:
    """What one request brought back: a redirect, an error status, a refusal or a body."""

    url: str
    http_status: int
    reason: str
    content_type: str | None
    location: str | None = None
    body: bytes | None = None
    retry_after: float | None = None
    failure: tuple[PageStatus, str] | None = None


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _describe(exc: Exception, settings: Settings, host: str) -> tuple[PageStatus, str]:
    """Map an exception raised while fetching to a page status and a short sentence."""
    if isinstance(exc, FetchError):
        status = exc.status if exc.status in PAGE_STATUSES else "connect_error"
        return cast(PageStatus, status), str(exc)
    detail = str(exc) or type(exc).__name__
    timeout, connect = _seconds(settings.timeout), _seconds(settings.connect_timeout)
    rules: tuple[tuple[type[Exception] | tuple[type[Exception], ...], PageStatus, str], ...] = (
        (httpx.ConnectTimeout, "timeout", f"timed out after {connect} connecting to {host}"),
        (httpx.TimeoutException, "timeout", f"timed out after {timeout} waiting for {host} to answer"),
        (asyncio.TimeoutError, "timeout", f"timed out after {timeout} fetching the page from {host}"),
        (httpx.ConnectError, "connect_error", f"could not connect to {host} ({detail})"),
        (httpx.DecodingError, "http_error", f"the response from {host} could not be decoded ({detail})"),
        (_BAD_URL, "blocked", f"not a valid URL ({detail})"),
    )
    for types, status, message in rules:
        if isinstance(exc, types):
            return status, message
    return "connect_error", f"the connection to {host} failed ({detail})"


def _host_of(url: str) -> str:
    """Return the host of `url` for limits and messages ("" when it has none)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


class Fetcher:
    """A `PageSource` that reads the cache and fetches what is missing.

    Use it as an async context manager (`async with Fetcher(settings) as fetcher:`) so one
    connection pool, cache handle and extraction pool serve every call; `pages` also works
    outside one, opening and closing them around the call. `client` and `resolver` are seams: a
    caller's `httpx.AsyncClient` is used as given and left open; `resolver` maps a host to its
    addresses (tests use it to point made-up names at a local server).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        client: httpx.AsyncClient | None = None,
        resolver: Resolver | None = None,
        progress: Progress | None = None,
    ) -> None:
        self._settings = settings
        self._given_client = client
        self._resolver: Resolver = resolver or system_resolver
        self._progress = progress
        self._client: httpx.AsyncClient | None = None
        self._transport: GuardedTransport | None = None
        self._client_ready: asyncio.Future[httpx.AsyncClient] | None = None
        self._cache: PageCache | None = None
        self._extractor: ExtractPool | None = None
        self._limit: asyncio.Semaphore | None = None
        self._host_limits: dict[str, asyncio.Semaphore] = {}

    async def __aenter__(self) -> Fetcher:
        self._cache = await PageCache(self._settings, extractor_version=EXTRACTOR_VERSION).__aenter__()
        self._extractor = ExtractPool(self._settings.extract_workers)
        self._limit = asyncio.Semaphore(self._settings.concurrency)
        if not self._settings.offline and self._given_client is None:
            # Made on a thread while the batch is read: loading the CA certificates takes a while.
            self._client_ready = asyncio.get_running_loop().run_in_executor(None, self._new_client)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool (unless it was given), the cache and the extraction workers."""
        client, self._client = self._client, None
        ready, self._client_ready = self._client_ready, None
        if client is None and ready is not None:
            client = await ready
        if client is not None and client is not self._given_client:
            await client.aclose()
        extractor, self._extractor = self._extractor, None
        cache, self._cache = self._cache, None
        # Both wait on threads (workers exiting, the last cache writes), so they wait together.
        closing = [part.aclose() for part in (extractor, cache) if part is not None]
        failures = [r for r in await asyncio.gather(*closing, return_exceptions=True) if isinstance(r, BaseException)]
        if failures:
            raise failures[0]

    async def pages(self, urls: Sequence[str]) -> dict[str, Page]:
        """One page per URL in `urls`, keyed by the URL as given; each distinct page fetched once."""
        return await in_given_order(self.pages_as_done(urls), urls)

    async def pages_as_done(self, urls: Sequence[str]) -> AsyncGenerator[tuple[str, Page], None]:
        """`(url, page)` for every URL in `urls`, in the order the pages become ready.

        Pages are requested in the order of `urls`, so the records cited first are complete first.
        """
        if not urls:
            return
        if self._cache is None:
            async with self:
                async for item in self._stream(urls):
                    yield item
            return
        async for item in self._stream(urls):
            yield item

    async def _stream(self, urls: Sequence[str]) -> AsyncGenerator[tuple[str, Page], None]:
        unique = plan_urls([urls])
        spellings: dict[str, list[str]] = {}
        for url in dict.fromkeys(urls):
            if url and url.strip():
                spellings.setdefault(url_key(url), []).append(url)
            else:
                yield url, Page(url=url, status="blocked", error="not a valid URL (it is blank)")
        done = _Counter(self._progress, len(unique))
        hits = await self._opened(self._cache).lookup(unique)
        tasks = [asyncio.ensure_future(self._page(url, hits.get(url), done)) for url in unique]
        try:
            for next_page in asyncio.as_completed(tasks):
                page = await next_page
                for given in spellings.pop(url_key(page.url), ()):
                    yield given, page if page.url == given else replace(page, url=given)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    @staticmethod
    def _opened(resource: _T | None) -> _T:
        if resource is None:
            raise RuntimeError("the fetcher is closed")
        return resource

    async def _from_cache(self, hit: CachedPage) -> Page:
        """Return the cached page, extracted again from its stored body when the extractor changed."""
        if hit.body is None:
            return hit.page
        page = await self._extracted(hit.page, hit.body, hit.content_type)
        await self._opened(self._cache).store(page, hit.body, hit.content_type)
        return page

    async def _page(self, url: str, hit: CachedPage | None, done: _Counter) -> Page:
        """Get the page for `url` from the cache, or fetch and store it (offline: `offline_miss`)."""
        if hit is not None:
            page = await self._from_cache(hit)
        elif self._settings.offline:
            page = Page(url=url, status="offline_miss", error=_REASONS["offline_miss"])
        else:
            page, body, content_type = await self._fetch(url)
            await self._opened(self._cache).store(page, body, content_type)
        done.add(1)
        return page

    async def _fetch(self, url: str) -> tuple[Page, bytes | None, str | None]:
        """Download and extract `url`; every failure becomes a page, never an exception."""
        try:
            reply = await self._download(url)
        except _FAILURES as exc:
            status, error = _describe(exc, self._settings, _host_of(url) or url)
            return Page(url=url, status=status, error=error, fetched_at=time.time()), None, None
        page = Page(
            url=url,
            status="ok",
            final_url=reply.url,
            http_status=reply.http_status,
            content_type=media_type(reply.content_type) or None,
            bytes=len(reply.body or b""),
            fetched_at=time.time(),
        )
        if reply.failure is not None:
            return replace(page, status=reply.failure[0], error=reply.failure[1]), None, None
        if reply.body is None:
            error = f"HTTP {reply.http_status} {reply.reason}".rstrip()
            return replace(page, status="http_error", error=error), None, None
        return await self._extracted(page, reply.body, reply.content_type), reply.body, reply.content_type

    async def _extracted(self, page: Page, body: bytes, content_type: str | None) -> Page:
        """`page` with the title, text and status that extraction gives its body."""
        try:
            extractor = self._opened(self._extractor)
            found = await extractor.extract(body, content_type, page.final_url or page.url)
        except FetchError as exc:
            return replace(page, status="empty", title=None, text=None, error=str(exc))
        error = None
        if found.status == "unsupported_type":
            error = f"unsupported content type {page.content_type or 'unknown'}"
        elif found.status == "empty":
            error = _REASONS["empty"]
        return replace(page, status=found.status, title=found.title, text=found.text, error=error)

    async def _download(self, url: str) -> _Reply:
        """Follow `url` to a final reply, retrying connection failures, 429 and 5xx with backoff.

        Everything runs under one deadline; a wait that would end past it is not started.
        """
        deadline = _Deadline(self._settings.timeout)
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
                asked = _seconds(reply.retry_after if reply.retry_after is not None else wait)
                past = f"asked to retry after {asked}, past the page's limit of {_seconds(deadline.limit)}"
                return replace(reply, reason=f"{reply.reason} ({past})".lstrip())
            await asyncio.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before the next try: `Retry-After` if given, else exponential with jitter; capped."""
        if retry_after is None:
            jitter = 0.5 + random.random() / 2  # noqa: S311 -- spreads retries, not a secret
            retry_after = _FIRST_BACKOFF * 2**attempt * jitter
        return min(retry_after, self._settings.retry_after_cap)

    async def _follow(self, url: str, deadline: _Deadline) -> _Reply:
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

    async def _hop(self, url: str, deadline: _Deadline) -> _Reply:
        """One request under the concurrency limits and the page's deadline: check, send, read."""
        async with self._host_limit(_host_of(url)), self._opened(self._limit):
            deadline.start()
            return await within(deadline.remaining(), self._exchange(url))

    def _host_limit(self, host: str) -> asyncio.Semaphore:
        limit = self._host_limits.get(host)
        if limit is None:
            limit = self._host_limits[host] = asyncio.Semaphore(self._settings.per_host)
        return limit

    async def _exchange(self, url: str) -> _Reply:
        """Check `url`, send one GET and read the reply within the size cap."""
        client = await self._http()
        target = await self._checked(url)
        self._opened(self._extractor).start()  # workers get ready while the response is on its way
        if self._transport is None:
            response = await self._send_pinned(client, target)
        else:
            response = await client.send(client.build_request("GET", target.url), stream=True, follow_redirects=False)
        try:
            return await self._reply(str(target.url), response)
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
        for address in target.addresses[:_ADDRESSES_TRIED]:
            request = client.build_request(
                "GET", target.request_url(address), headers=headers, extensions=target.request_extensions()
            )
            try:
                return await client.send(request, stream=True, follow_redirects=False)
            except httpx.ConnectError as exc:  # e.g. an IPv6 address on a host without IPv6
                refused = exc
        assert refused is not None  # noqa: S101 -- a target always has an address
        raise refused

    async def _reply(self, url: str, response: httpx.Response) -> _Reply:
        """Turn a response whose body is not read yet into a `_Reply`."""
        headers = response.headers
        reply = _Reply(url, response.status_code, response.reason_phrase, headers.get("content-type"))
        if response.status_code in _REDIRECTS and headers.get("location"):
            return replace(reply, location=headers["location"])
        if not 200 <= response.status_code < 300:  # noqa: PLR2004 -- the success range
            return replace(reply, retry_after=retry_after_seconds(headers.get("retry-after")))
        if not supported_type(reply.content_type):
            unsupported = f"unsupported content type {media_type(reply.content_type)}"
            return replace(reply, failure=("unsupported_type", unsupported))
        cap = self._settings.max_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            too_large = f"the page is {int(declared):,} bytes, over the limit of {cap:,}"
            return replace(reply, failure=("too_large", too_large))
        body = await self._read_capped(response, cap)
        if body is None:
            return replace(reply, failure=("too_large", f"the page is over the limit of {cap:,} bytes"))
        return replace(reply, body=body)

    async def _read_capped(self, response: httpx.Response, cap: int) -> bytes | None:
        """Read the (decoded) body; return None as soon as it grows past `cap` bytes."""
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > cap:
                    return None
                chunks.append(chunk)
        except httpx.ReadTimeout:
            raise FetchError(
                "timeout", f"timed out after {_seconds(self._settings.timeout)} reading the body"
            ) from None
        return b"".join(chunks)

    async def _http(self) -> httpx.AsyncClient:
        """Return the client requests go through: the one given, or one made for this fetcher."""
        if self._client is None:
            if self._given_client is not None:
                self._client = self._given_client
            elif self._client_ready is not None:
                self._client = await self._client_ready
            else:
                self._client = self._new_client()
        return self._client

    def _new_client(self) -> httpx.AsyncClient:
        """The fetcher's own client, on a guarded transport (made on a thread: it loads certificates)."""
        settings = self._settings
        if settings.proxy is not None:
            proxies = {"http": settings.proxy, "https": settings.proxy}
        else:
            proxies = environment_proxies() if settings.trust_env else {}
        self._transport = GuardedTransport(settings, self._resolver, ssl_context=tls_context(settings),
                                           proxies=proxies)
        return httpx.AsyncClient(
            headers={"User-Agent": USER_AGENT, "Accept": ACCEPT},
            timeout=httpx.Timeout(settings.timeout, connect=settings.connect_timeout),
            transport=self._transport,
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            follow_redirects=False,
            trust_env=False,
        )


class _Deadline:
    """One page's time limit, counted from its first request."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._end: float | None = None

    def start(self) -> None:
        if self._end is None:
            self._end = asyncio.get_running_loop().time() + self.limit

    def remaining(self) -> float:
        if self._end is None:
            return self.limit
        return max(0.0, self._end - asyncio.get_running_loop().time())


class _Counter:
    """Counts finished pages and reports them to a progress callback."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self._progress = progress
        self._total = total
        self._done = 0
        if progress is not None:
            progress("fetch", 0, total)

    def add(self, count: int) -> None:
        self._done += count
        if self._progress is not None and count:
            self._progress("fetch", self._done, self._total)
