"""The fetcher: the only stage that touches the network.

`Fetcher.pages(urls)` gives one `Page` per URL: the batch side. Each distinct page (by `url_key`)
is looked up in the cache, and what is missing is fetched in parallel, then handed to worker
processes for extraction while other pages are still downloading. One URL's requests are
`_download`'s (limits, retries, redirects checked hop by hop, one deadline per page); what its
reply becomes, and how a failure is worded, is `_reply`'s.

Every failure becomes a page status with a short sentence saying what happened; nothing raises
for a bad URL.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing, nullcontext
from dataclasses import replace
from typing import TypeVar

import httpx

from tlmscore._urls import host_of
from tlmscore.errors import ConfigError
from tlmscore.evidence._download import Downloader, as_done
from tlmscore.evidence._guard import Resolver, system_resolver
from tlmscore.evidence._reply import FAILURES, describe
from tlmscore.evidence._template import Limits
from tlmscore.evidence._workers import ExtractPool
from tlmscore.evidence.cache import CachedPage, PageCache
from tlmscore.evidence.extract import extractor_version, media_type
from tlmscore.evidence.page import AsOf, Page, PageSource
from tlmscore.evidence.plan import Plan
from tlmscore.settings import Settings

__all__ = ["ACCEPT", "USER_AGENT", "Fetcher", "Progress"]

USER_AGENT = "tlmscore/0.1 (+https://github.com/tlmscore/tlmscore)"
ACCEPT = (
    "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8"
    ",application/json;q=0.8,*/*;q=0.1"
)
_T = TypeVar("_T")
Progress = Callable[[str, int, int], None]
"""Called as `progress(stage, done, total)` each time a page is done; the CLI draws bars from it."""


def _check_installed(extractor: str) -> None:
    """Refuse, before any page is fetched, an extractor whose package is not installed."""
    if extractor != "resiliparse":
        return
    try:
        importlib.import_module("resiliparse.extract.html2text")
    except ImportError:
        raise ConfigError("--extractor resiliparse needs the resiliparse extra: "
                          "pip install 'tlmscore[resiliparse]'") from None


class Fetcher(PageSource):
    """A page source that reads the cache and fetches what is missing; each distinct page fetched once.

    Use it as an async context manager (`async with Fetcher(settings) as fetcher:`) so one
    connection pool, cache handle and extraction pool serve every call; `pages` also works
    outside one, opening and closing them around the call. `client` and `resolver` are seams: a
    caller's `httpx.AsyncClient` is used as given and left open (each request is sent to an address
    checked here and never follows redirects itself, see `download`); `resolver` maps a host to its
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
        self._downloader: Downloader | None = None
        self._cache: PageCache | None = None
        self._extractor: ExtractPool | None = None

    async def __aenter__(self) -> Fetcher:
        extractor = self._settings.extractor
        _check_installed(extractor)
        self._cache = await PageCache(self._settings, extractor_version=extractor_version(extractor),
                                      resolver=self._resolver).__aenter__()
        self._extractor = ExtractPool(self._settings.extract_workers, Limits(
            cpu_seconds=self._settings.extract_timeout, memory_bytes=self._settings.extract_memory), extractor)
        # the workers get ready while the first response is on its way
        self._downloader = Downloader(self._settings, self._resolver, client=self._given_client,
                                      headers={"User-Agent": USER_AGENT, "Accept": ACCEPT},
                                      on_send=self._extractor.start)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool (unless it was given), the cache and the extraction workers."""
        downloader, self._downloader = self._downloader, None
        if downloader is not None:
            await downloader.aclose()
        extractor, self._extractor = self._extractor, None
        cache, self._cache = self._cache, None
        # Both wait on threads (workers exiting, the last cache writes), so they wait together.
        closing = [part.aclose() for part in (extractor, cache) if part is not None]
        failures = [r for r in await asyncio.gather(*closing, return_exceptions=True) if isinstance(r, BaseException)]
        if failures:
            raise failures[0]

    async def pages_as_done(self, urls: Sequence[str],
                            as_of: AsOf | None = None) -> AsyncGenerator[tuple[str, Page], None]:
        """`(url, page)` for every URL in `urls`, in the order the pages become ready.

        Pages are requested in the order of `urls`, so the records cited first are complete first.
        The live web has no history, so `as_of` plays no part here (see `archive.ArchivePages`).
        """
        if not urls:
            return
        opened = self if self._cache is None else nullcontext(self)  # opened around this call alone
        async with opened, aclosing(self._stream(urls)) as items:
            async for item in items:
                yield item

    async def _stream(self, urls: Sequence[str]) -> AsyncGenerator[tuple[str, Page], None]:
        plan = Plan.of([urls])
        for url in dict.fromkeys(urls):
            if not url or not url.strip():
                yield url, Page(url=url, status="blocked", error="not a valid URL (it is blank)")
        total = len(plan)
        if self._progress is not None:
            self._progress("fetch", 0, total)
        hits = await self._opened(self._cache).lookup(plan.urls)
        pages = as_done(self._page(spellings, hits.get(spellings[0])) for spellings in plan.spellings.values())
        done = 0
        async with aclosing(pages) as ready:
            async for spellings, page in ready:
                done += 1
                if self._progress is not None:
                    self._progress("fetch", done, total)
                for given in spellings:
                    yield given, page if page.url == given else replace(page, url=given)

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

    async def _page(self, spellings: tuple[str, ...], hit: CachedPage | None) -> tuple[tuple[str, ...], Page]:
        """The spellings, and their page: cached, else fetched and stored (offline: `offline_miss`)."""
        url = spellings[0]
        if hit is not None:
            page = await self._from_cache(hit)
        elif self._settings.offline:
            page = Page(url=url, status="offline_miss", error="not in the cache, and offline mode never fetches")
        else:
            page, body, content_type = await self._fetch(url)
            await self._opened(self._cache).store(page, body, content_type)
        return spellings, page

    async def _fetch(self, url: str) -> tuple[Page, bytes | None, str | None]:
        """Download and extract `url`; every failure becomes a page, never an exception."""
        try:
            reply = await self._opened(self._downloader).download(url)
        except FAILURES as exc:
            status, error = describe(exc, self._settings, host_of(url) or url)
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
        if reply.failure is not None or reply.body is None:
            status, error = reply.failure or ("http_error", f"HTTP {reply.http_status} {reply.reason}".rstrip())
            return replace(page, status=status, error=error), None, None
        return await self._extracted(page, reply.body, reply.content_type), reply.body, reply.content_type

    async def _extracted(self, page: Page, body: bytes, content_type: str | None) -> Page:
        """`page` with the title, text and status that extraction gives its body."""
        found = await self._opened(self._extractor).extract(body, content_type, page.final_url or page.url)
        error = found.error  # why, for extract_failed (a page's failure never raises)
        if found.status == "unsupported_type":
            error = f"unsupported content type {page.content_type or 'unknown'}"
        elif found.status == "empty":
            error = "no readable text found in the page"
        return replace(page, status=found.status, title=found.title, text=found.text, error=error)

