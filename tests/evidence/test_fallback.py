"""`Fallback`: one page source making up for another's failures, as the archive and the page model do."""

from __future__ import annotations

import asyncio

from tlmscore.evidence.page import Fallback, MemoryPages, Page


def _all(source: Fallback, urls: list[str]) -> list[tuple[str, Page]]:
    async def collect() -> list[tuple[str, Page]]:
        return [item async for item in source.pages_as_done(urls)]
    return asyncio.run(collect())


def test_only_the_pages_it_retries_are_asked_again_and_a_second_failure_keeps_both_reasons() -> None:
    first = MemoryPages([Page(url="https://a.test/", status="ok", text="A"),
                         Page(url="https://b.test/", status="http_error", error="HTTP 403"),
                         Page(url="https://c.test/", status="blocked", error="a private address")])
    then = MemoryPages([Page(url="https://b.test/", status="ok", text="B from elsewhere")])
    retried = Fallback(first, then, retry=lambda _url, page: page.status == "http_error")
    got = dict(_all(retried, ["https://a.test/", "https://b.test/", "https://c.test/", "https://d.test/"]))
    assert got["https://a.test/"].text == "A"
    assert got["https://b.test/"].text == "B from elsewhere"  # made up for
    assert got["https://c.test/"].status == "blocked"  # not retried: kept as it was
    assert got["https://d.test/"].status == "offline_miss"  # first's miss is not one it retries

    both = Fallback(first, MemoryPages(), retry=lambda _url, page: not page.ok and page.status != "blocked")
    failed = dict(_all(both, ["https://b.test/"]))["https://b.test/"]
    assert failed.status == "http_error" and failed.error is not None
    assert failed.error.startswith("HTTP 403; ")  # the first failure, and why the second source did not help

    plain = Fallback(first, MemoryPages(), retry=lambda _url, page: not page.ok, keep_first=False)
    assert dict(_all(plain, ["https://b.test/"]))["https://b.test/"].status == "offline_miss"  # the second's own
