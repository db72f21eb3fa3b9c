"""The page cache: key format, freshness, failures, several processes, stats and clear."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import replace
from pathlib import Path

import diskcache
import pytest

from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tlmscore.evidence.cache import CachedPage, PageCache, body_key, cache_key, cache_stats, clear_cache
from tlmscore.evidence.extract import EXTRACTOR_VERSION
from tlmscore.evidence.fetch import Fetcher
from tlmscore.evidence.page import Page
from tlmscore.settings import Settings

URL = "https://example.com/article"


def make_settings(tmp_path: Path, **overrides: object) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", **overrides)  # type: ignore[arg-type]


def ok_page(url: str = URL, text: str = "Body text", fetched_at: float | None = None) -> Page:
    return Page(url=url, status="ok", final_url=url, http_status=200, content_type="text/html",
                title="Title", text=text, bytes=9, fetched_at=time.time() if fetched_at is None else fetched_at)


async def _store(settings: Settings, *pages: Page, body: bytes | None = None, version: str = EXTRACTOR_VERSION) -> None:
    async with PageCache(settings, extractor_version=version) as cache:
        for page in pages:
            await cache.store(page, body, "text/html" if body else None)


async def _lookup(settings: Settings, *urls: str, version: str = EXTRACTOR_VERSION) -> dict[str, CachedPage]:
    async with PageCache(settings, extractor_version=version) as cache:
        return await cache.lookup(urls)


def store(settings: Settings, *pages: Page, body: bytes | None = None, version: str = EXTRACTOR_VERSION) -> None:
    asyncio.run(_store(settings, *pages, body=body, version=version))


def lookup(settings: Settings, *urls: str, version: str = EXTRACTOR_VERSION) -> dict[str, CachedPage]:
    return asyncio.run(_lookup(settings, *urls, version=version))


def test_key_is_versioned_hash_of_the_url_key() -> None:
    expected = "v1:" + hashlib.sha256(b"https://example.com/a?id=3").hexdigest()
    assert cache_key("HTTPS://Example.COM:443/a?id=3&utm_source=openai#part") == expected


def test_round_trip_answers_for_any_spelling_of_the_url(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    store(settings, ok_page())
    spelled = URL + "?utm_source=chatgpt.com"
    found = lookup(settings, spelled, "https://example.com/other")
    assert list(found) == [spelled]
    stored = found[spelled].page
    assert stored == replace(ok_page(fetched_at=stored.fetched_at), url=spelled)
    assert found[spelled].body is None


def test_old_pages_are_stale_online_but_served_offline(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, cache_max_age=60)
    store(settings, ok_page(fetched_at=time.time() - 120))
    assert lookup(settings, URL) == {}
    offline = make_settings(tmp_path, cache_max_age=60, offline=True)
    assert lookup(offline, URL)[URL].page.status == "ok"


def test_failures_are_remembered_briefly(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, failure_ttl=60)
    recent, old = "https://example.com/recent", "https://example.com/old"
    store(
        settings,
        Page(url=recent, status="http_error", http_status=503, error="HTTP 503", fetched_at=time.time() - 30),
        Page(url=old, status="timeout", error="timed out", fetched_at=time.time() - 90),
    )
    assert list(lookup(settings, recent, old)) == [recent]


def test_failures_expire_from_disk(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, failure_ttl=0.5)
    store(settings, Page(url=URL, status="http_error", error="HTTP 500", fetched_at=time.time()))
    time.sleep(0.6)
    with diskcache.Cache(str(settings.cache_dir)) as raw:
        assert cache_key(URL) not in raw


def test_failures_are_not_stored_when_failure_ttl_is_zero(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, failure_ttl=0)
    store(settings, Page(url=URL, status="timeout", error="timed out", fetched_at=time.time()))
    assert lookup(settings, URL) == {}


@pytest.mark.parametrize("status", ["blocked", "offline_miss"])
def test_run_dependent_statuses_are_never_stored(tmp_path: Path, status: str) -> None:
    settings = make_settings(tmp_path)
    store(settings, Page(url=URL, status=status, error="no", fetched_at=time.time()))  # type: ignore[arg-type]
    assert lookup(settings, URL) == {}


def test_new_extractor_version_gets_the_stored_body_back(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    store(settings, ok_page(), body=b"<html>raw</html>", version="old")
    hit = lookup(settings, URL, version="new")[URL]
    assert hit.body == b"<html>raw</html>"
    assert hit.content_type == "text/html"
    assert lookup(settings, URL, version="old")[URL].body is None


def test_bodies_are_zstd_inside_sqlite_and_older_zlib_bodies_still_read(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    body = b"<html><p>" + b"evidence " * 20_000 + b"</p></html>"  # 180 KB: over diskcache's own file limit
    store(settings, ok_page(), body=body, version="old")
    with diskcache.Cache(str(settings.cache_dir)) as raw:
        stored = raw.get(body_key(URL))
        assert stored["codec"] == "zstd" and len(stored["body"]) < len(body) // 20
        assert not list(settings.cache_dir.rglob("*.val"))  # no value spilled to a file of its own
        raw.set(body_key(URL), {"body": zlib.compress(b"<html>old</html>"), "content_type": "text/html"})
    assert lookup(settings, URL, version="new")[URL].body == b"<html>old</html>"


def test_pages_stored_at_once_all_arrive(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    urls = [f"https://example.com/{n}" for n in range(40)]

    async def store_together() -> None:
        async with PageCache(settings, extractor_version=EXTRACTOR_VERSION) as cache:
            await asyncio.gather(*(cache.store(ok_page(u, text=u), u.encode(), "text/plain") for u in urls))

    asyncio.run(store_together())
    found = lookup(settings, *urls, version="new")
    assert [found[u].page.text for u in urls] == urls
    assert [found[u].body for u in urls] == [u.encode() for u in urls]


def test_new_extractor_version_without_a_body_means_fetch_again(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    asyncio.run(_store_with_version_but_no_body(settings))
    assert lookup(settings, URL, version="new") == {}
    assert URL in lookup(make_settings(tmp_path, offline=True), URL, version="new")


async def _store_with_version_but_no_body(settings: Settings) -> None:
    async with PageCache(settings, extractor_version="old") as cache:
        await cache.store(ok_page(), b"x", "text/html")
    with diskcache.Cache(str(settings.cache_dir)) as raw:  # the body goes missing behind its back
        assert raw.delete(body_key(URL))
    async with PageCache(settings, extractor_version="old") as cache:
        assert (await cache.lookup([URL]))[URL].body is None


def test_stats_and_clear(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    assert cache_stats(settings.cache_dir).entries == 0
    store(settings, ok_page(), ok_page("https://example.com/2"), body=b"<html>body</html>")
    store(settings, Page(url="https://example.com/3", status="http_error", error="HTTP 404", fetched_at=time.time()))
    stats = cache_stats(settings.cache_dir)
    assert (stats.entries, stats.ok, stats.failed) == (3, 2, 1)
    assert stats.size_bytes > 0
    assert stats.directory == settings.cache_dir
    assert clear_cache(settings.cache_dir) == 3
    assert cache_stats(settings.cache_dir).entries == 0
    assert clear_cache(tmp_path / "never-made") == 0


WRITER = """
import asyncio, sys, time
from pathlib import Path
from tlmscore.evidence.cache import PageCache
from tlmscore.evidence.page import Page
from tlmscore.settings import Settings

async def main(directory, name):
    async with PageCache(Settings(cache_dir=Path(directory)), extractor_version="v") as cache:
        for n in range(40):
            url = f"https://example.com/{name}/{n}"
            page = Page(url=url, status="ok", text="t" * 500, fetched_at=time.time())
            await cache.store(page, b"<p>" * 2000, "text/html")

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_several_processes_can_write_at_once(tmp_path: Path) -> None:
    directory = tmp_path / "shared-cache"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(directory), name]) for name in ("a", "b")
    ]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    assert cache_stats(directory).entries == 80


def test_fetcher_re_extracts_cached_bodies_without_fetching(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, allow_hosts={"127.0.0.1"})
    with EvidenceServer() as server:
        url = server.route("/a", Reply(body=b"never served"))
        body = html_page("Stored", "This paragraph was stored as the raw body of the page in the cache.")
        store(settings, ok_page(url, text="old extraction"), body=body, version="extractor-0")

        async def run() -> Page:
            async with Fetcher(settings) as fetcher:
                return (await fetcher.pages([url]))[url]

        page = asyncio.run(run())
        assert server.count() == 0
    assert page.status == "ok"
    assert "stored as the raw body" in (page.text or "")
    assert lookup(settings, url)[url].page.text == page.text  # saved under the current version


def test_a_page_is_passed_on_without_waiting_for_its_write(tmp_path: Path) -> None:
    """The write is queued: `store` returns before it is done, and closing the cache waits for it."""
    settings = make_settings(tmp_path)

    async def run() -> bool:
        gate = threading.Event()
        async with PageCache(settings, extractor_version=EXTRACTOR_VERSION) as cache:
            await cache._run(lambda: None)  # the IO thread is idle
            blocker = asyncio.ensure_future(cache._run(gate.wait, 60))  # and now busy until the gate opens
            await cache.store(ok_page(), b"<html>x</html>", "text/html")
            returned_while_busy = not blocker.done()  # a write queued behind the blocker was not waited for
            gate.set()
            await blocker
        return returned_while_busy

    assert asyncio.run(run())
    assert lookup(settings, URL)[URL].page.text == "Body text"


def test_a_cache_that_cannot_be_written_costs_only_the_caching(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    settings = make_settings(tmp_path, allow_hosts=frozenset({"127.0.0.1"}), extract_workers=1)

    def full_disk(*args: object, **kwargs: object) -> None:
        raise diskcache.core.sqlite3.OperationalError("database or disk is full")

    with EvidenceServer() as server:
        urls = [server.route(f"/{n}", Reply(body=html_page(f"Page {n}", "Text of the page " * 20)))
                for n in range(3)]

        async def run() -> dict[str, Page]:
            async with Fetcher(settings) as fetcher:
                monkeypatch.setattr(diskcache.Cache, "set", full_disk)
                return await fetcher.pages(urls)

        with pytest.warns(RuntimeWarning, match=r"3 fetched pages could not be saved .* disk is full"):
            pages = asyncio.run(run())
    monkeypatch.undo()
    assert [pages[u].status for u in urls] == ["ok", "ok", "ok"]
    assert lookup(settings, *urls) == {}


# ------------------------------------------------------------------------------- the guard on cached pages


def _fetch_pages(settings: Settings, urls: list[str], resolver: object = None) -> dict[str, Page]:
    async def run() -> dict[str, Page]:
        async with Fetcher(settings, resolver=resolver) as fetcher:  # type: ignore[arg-type]
            return await fetcher.pages(urls)

    return asyncio.run(run())


def _resolver(table: dict[str, str], calls: list[str] | None = None) -> object:
    async def resolve(host: str, _port: int) -> list[str]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise OSError(-2, "Name or service not known")
        return [table[host]]

    return resolve


@pytest.mark.parametrize("offline", [False, True])
def test_a_page_fetched_from_an_allowed_host_is_not_served_once_it_is_not_allowed(tmp_path: Path,
                                                                                  offline: bool) -> None:
    with EvidenceServer() as server:
        url = server.route("/intranet", Reply(body=html_page("Intranet", "Salaries are reviewed in May.")))
        allowed = make_settings(tmp_path, allow_hosts={"127.0.0.1"})
        assert _fetch_pages(allowed, [url])[url].status == "ok"
        later = _fetch_pages(make_settings(tmp_path, offline=offline), [url])[url]
        again = _fetch_pages(allowed, [url])[url]
        assert server.count("/intranet") == 1  # the refused page was neither fetched nor dropped
    assert later.status == "blocked" and later.text is None
    assert "loopback" in (later.error or "") and "cached page" in (later.error or "")
    assert again.status == "ok"


def test_a_name_allowed_when_fetched_is_checked_again_by_what_it_resolves_to_now(tmp_path: Path) -> None:
    with EvidenceServer() as server:
        server.route("/wiki", Reply(body=html_page("Wiki", "The build server is called falcon.")))
        url = server.url("/wiki", host="wiki.corp.test")
        local = _resolver({"wiki.corp.test": "127.0.0.1"})
        assert _fetch_pages(make_settings(tmp_path, allow_hosts={"wiki.corp.test"}), [url], local)[url].status == "ok"
        refused = _fetch_pages(make_settings(tmp_path), [url], local)[url]
        offline = _fetch_pages(make_settings(tmp_path, offline=True), [url], local)[url]
        public = _fetch_pages(make_settings(tmp_path), [url], _resolver({"wiki.corp.test": "93.184.216.34"}))[url]
    assert refused.status == "blocked" and "127.0.0.1" in (refused.error or "")
    assert offline.status == "blocked" and "not allowed in this run" in (offline.error or "")
    assert public.status == "ok"  # where a fetch would be allowed, the cached page is served


def test_a_redirect_to_an_allowed_host_is_checked_through_its_final_url(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, allow_hosts={"10.0.0.7"})
    store(settings, replace(ok_page(), final_url="http://10.0.0.7/moved"))
    assert lookup(settings, URL)[URL].page.status == "ok"
    found = lookup(make_settings(tmp_path), URL)[URL].page
    assert found.status == "blocked" and "private address" in (found.error or "")


def test_a_page_that_passed_the_guard_unaided_is_served_without_resolving(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    store(settings, ok_page())
    calls: list[str] = []
    assert _fetch_pages(settings, [URL], _resolver({}, calls))[URL].status == "ok"
    assert calls == []


def test_a_record_from_before_allowed_hops_is_checked_again(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    with diskcache.Cache(str(settings.cache_dir)) as cache:
        cache.set(cache_key(URL), {"page": ok_page().to_record(), "extractor": None, "has_body": False})
    calls: list[str] = []
    resolving_to_loopback = _resolver({"example.com": "127.0.0.1"}, calls)
    found = _fetch_pages(settings, [URL], resolving_to_loopback)[URL]
    assert calls == ["example.com"]
    assert found.status == "blocked"
    assert _fetch_pages(settings, [URL], _resolver({"example.com": "93.184.216.34"}))[URL].status == "ok"
    calls.clear()
    assert _fetch_pages(settings, [URL], _resolver({}, calls))[URL].status == "ok"  # noted as unaided by now
    assert calls == []


def test_a_cache_folder_that_cannot_be_made_fails_the_first_lookup(tmp_path: Path) -> None:
    """The files are opened on the cache's thread while the run goes on; what opening them raised
    comes out of the first lookup, not lost."""
    (tmp_path / "taken").write_text("a file where the cache folder should be", encoding="utf-8")

    async def run() -> None:
        async with PageCache(Settings(cache_dir=tmp_path / "taken"), extractor_version="v") as cache:
            with pytest.raises(FileExistsError):
                await cache.lookup(["https://example.com/a"])

    asyncio.run(run())
