"""The page record (a contract) and the `PageSource` seam the renderer reads pages through.

A source is asked for a plan's pages together with `as_of`: for each URL (by `url_key`), the time
the answer citing it was given, so a source that keeps history (a web archive) can give the page
as the model read it. A URL cited by several answers is asked for as of the earliest of them: a
snapshot at or before that time is at or before every answer citing it. What comes back is keyed
by `url_key` alone (`PagesByKey`); `page_for` looks a cited URL's page up in it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Protocol, get_args

from tlmscore._urls import url_key
from tlmscore.evidence.plan import Plan

__all__ = ["PAGE_STATUSES", "AsOf", "Fallback", "MemoryPages", "Page", "PageOrigin", "PageSource", "PageStatus",
           "PagesByKey", "answered_at", "in_given_order", "keyed_pages", "page_for", "pages_as_done", "planned_pages",
           "with_reason"]

PageStatus = Literal[
    "ok",
    "http_error",
    "timeout",
    "connect_error",
    "dns_error",
    "blocked",
    "too_large",
    "unsupported_type",
    "empty",
    "redirect_loop",
    "offline_miss",
    "extract_failed",
    "model_failed",
]
PAGE_STATUSES: tuple[str, ...] = get_args(PageStatus)
PageOrigin = Literal["live", "archive", "log", "model"]
"""Where a page's text came from: fetched from the web, from a web archive's snapshot, from the log
itself, or a model's summary of the page (`--page-source chat`)."""
AsOf = Mapping[str, float]
"""`url_key(url)` -> Unix time the page is wanted as of (when the answer citing it was given)."""


@dataclass(frozen=True)
class Page:
    """What is known about one URL: its text when fetched, or why it could not be.

    `text` is set only when `status == "ok"`; a failed page never carries invented content.
    `source` says where the text came from; `archived_at` is the snapshot's time (Unix seconds)
    when it came from an archive. A page a model read (`source == "model"`) names that model in
    `model`, and `fetched_at` is when it was read: its text is the model's summary, not the page.
    `model_failed` is the status of a page the model could not read (`error` says why).
    """

    url: str
    status: PageStatus
    final_url: str | None = None
    http_status: int | None = None
    content_type: str | None = None
    title: str | None = None
    text: str | None = None
    bytes: int = 0
    fetched_at: float | None = None
    error: str | None = None
    source: PageOrigin = "live"
    archived_at: float | None = None
    model: str | None = None

    @property
    def ok(self) -> bool:
        """True when the page has text to show."""
        return self.status == "ok" and bool(self.text)

    def to_record(self) -> dict[str, Any]:
        """The page record of DESIGN §3.3 as a plain dict."""
        return asdict(self)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Page:
        """Rebuild a page from `to_record` output, ignoring fields it does not know."""
        names = cls.__dataclass_fields__.keys()
        return cls(**{k: v for k, v in record.items() if k in names})


PagesByKey = Mapping[str, Page]
"""Pages keyed by the `url_key` of their URL: one entry per page, whatever spelling cites it."""


def page_for(pages: PagesByKey, url: str) -> Page:
    """The page cited as `url` in `pages` (keyed by `url_key`).

    A URL the mapping lacks is a failed page saying so, never invented content.
    """
    page = pages.get(url_key(url))
    return page if page is not None else Page(url=url, status="offline_miss", error="no page was available")


class PageSource(Protocol):
    """Gives pages for URLs. The fetcher implements it; tests pass a `MemoryPages`.

    Every URL asked for (as given) gets a `Page`; a URL a source cannot serve gets a failed page,
    never nothing. The pipeline reads pages through `pages_as_done`, so a record is rendered as
    soon as its own pages are ready. A class that subclasses `PageSource` and implements one of
    the two methods gets the other from it.
    """

    async def pages(self, urls: Sequence[str], as_of: AsOf | None = None) -> dict[str, Page]:
        """Return one page per URL in `urls`, keyed and ordered as given."""
        return await in_given_order(self.pages_as_done(urls, as_of), urls)

    async def pages_as_done(self, urls: Sequence[str],
                            as_of: AsOf | None = None) -> AsyncGenerator[tuple[str, Page], None]:
        """`(url, page)` for every URL in `urls`, each as soon as its page is ready."""
        for item in (await self.pages(urls, as_of)).items():
            yield item


def answered_at(response: Mapping[str, Any]) -> float | None:
    """When a logged response was made (Unix seconds): Responses `created_at`, Chat `created`."""
    for name in ("created_at", "created"):
        value = response.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


async def in_given_order(stream: AsyncIterator[tuple[str, Page]], urls: Sequence[str]) -> dict[str, Page]:
    """The `(url, page)` pairs of `stream` as one page per URL, keyed and ordered as in `urls`."""
    found = {url: page async for url, page in stream}
    return {url: found[url] for url in urls}


async def pages_as_done(source: PageSource, urls: Sequence[str],
                        as_of: AsOf | None = None) -> AsyncGenerator[tuple[str, Page], None]:
    """`(url, page)` for every URL in `urls` from `source`, each as soon as its page is ready."""
    async with aclosing(source.pages_as_done(urls, as_of)) as items:
        async for item in items:
            yield item


async def planned_pages(source: PageSource, plan: Plan) -> AsyncGenerator[tuple[str, Page], None]:
    """`(key, page)` for every page of `plan` from `source`, each as soon as it is ready.

    The source is asked for each page once, by the spelling cited first, as of the plan's times.
    """
    async with aclosing(source.pages_as_done(plan.urls, plan.as_of)) as items:
        async for url, page in items:
            yield url_key(url), page


async def keyed_pages(source: PageSource, plan: Plan) -> dict[str, Page]:
    """Every page of `plan` from `source`, keyed by `url_key`: what `render` takes."""
    async with aclosing(planned_pages(source, plan)) as found:
        return {key: page async for key, page in found}


class MemoryPages(PageSource):
    """A `PageSource` over pages held in memory, matched by `url_key`; a miss is `offline_miss`."""

    def __init__(self, pages: Iterable[Page] | Mapping[str, str] = ()) -> None:
        if isinstance(pages, Mapping):
            pages = [Page(url=u, status="ok", text=t, final_url=u) for u, t in pages.items()]
        self._pages = {url_key(page.url): page for page in pages}

    async def pages(self, urls: Sequence[str], as_of: AsOf | None = None) -> dict[str, Page]:
        """Return the held page for each URL, or an `offline_miss` page (`as_of` plays no part)."""
        return {url: self.get(url) for url in urls}

    def get(self, url: str) -> Page:
        """The held page for `url`, or an `offline_miss` page."""
        page = self._pages.get(url_key(url))
        if page is None:
            return Page(url=url, status="offline_miss", error="page not available offline")
        return page


def with_reason(page: Page, reason: str) -> Page:
    """A failed page, saying also why the source asked after it did not make up for it."""
    return replace(page, error=f"{page.error or page.status}; {reason}")


class Fallback(PageSource):
    """Pages from `first`; those `retry(url, page)` picks, asked of `then` once `first` is done with all.

    A page `then` gives is used when it is ok; otherwise the first page stays, its error saying also why
    `then` could not help (`keep_first`), or `then`'s page is used as it is. The web archive and the
    page model each make up for the pages below them this way.
    """

    def __init__(self, first: PageSource, then: PageSource, *, retry: Callable[[str, Page], bool],
                 keep_first: bool = True) -> None:
        self._first = first
        self._then = then
        self._retry = retry
        self._keep_first = keep_first

    async def pages_as_done(self, urls: Sequence[str],
                            as_of: AsOf | None = None) -> AsyncGenerator[tuple[str, Page], None]:
        """`(url, page)` per URL: `first`'s pages as they come, then the retried ones as `then` gives them."""
        failed: dict[str, Page] = {}
        async with aclosing(pages_as_done(self._first, urls, as_of)) as got:
            async for url, page in got:
                if self._retry(url, page):
                    failed[url] = page
                else:
                    yield url, page
        if not failed:
            return
        async with aclosing(pages_as_done(self._then, list(failed), as_of)) as again:
            async for url, found in again:
                if found.ok or not self._keep_first:
                    yield url, found
                else:
                    yield url, with_reason(failed[url], found.error or found.status)
