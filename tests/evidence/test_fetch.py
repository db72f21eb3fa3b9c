"""The fetcher against real HTTP servers on 127.0.0.1: every page status, limits, retries, cache."""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import json
import re
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Sequence
from email.utils import formatdate
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.evidence.test_extract import make_pdf
from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tlmscore.evidence import cache as cache_module
from tlmscore.evidence import extract as extract_module
from tlmscore.evidence import fetch as fetch_module
from tlmscore.evidence._guard import Resolver
from tlmscore.evidence.fetch import USER_AGENT, Fetcher
from tlmscore.evidence.page import PAGE_STATUSES, Page
from tlmscore.evidence.plan import Plan
from tlmscore.pipeline import aprepare
from tlmscore.settings import Settings

ARTICLE = html_page(
    "Tram news",
    "The council voted on Tuesday to extend the tram line to the airport by 2031.",
    "Residents of Zürich welcomed the decision, which was long expected — “finally”, one said.",
)
LOCAL = frozenset({"127.0.0.1"})


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Local server allowed; small timeouts and waits so fault tests take a fraction of a second."""
    return Settings(cache_dir=tmp_path / "cache", allow_hosts=LOCAL, timeout=1.0, connect_timeout=1.0,
                    retry_after_cap=0.05, extract_workers=1)


def table_resolver(table: dict[str, Sequence[str]]) -> Resolver:
    async def resolve(host: str, port: int) -> Sequence[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    return resolve


def fetch(settings: Settings, urls: Sequence[str], **kwargs: object) -> dict[str, Page]:
    async def run() -> dict[str, Page]:
        async with Fetcher(settings, **kwargs) as fetcher:  # type: ignore[arg-type]
            return await fetcher.pages(urls)

    return asyncio.run(run())


def one(settings: Settings, url: str, **kwargs: object) -> Page:
    return fetch(settings, [url], **kwargs)[url]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------------------------------- planning


def test_plan_keeps_the_first_spelling_of_each_page_in_order() -> None:
    lists = [
        ["https://b.example/x?utm_source=openai", "https://a.example/"],
        ["", "https://B.example/x", "https://c.example/#top", "  "],
        ["https://a.example", "https://c.example/"],
    ]
    plan = Plan.of(lists, {"https://a.example/": 5.0})
    assert plan.urls == ["https://b.example/x?utm_source=openai", "https://a.example/", "https://c.example/#top"]
    assert plan.spellings == {
        "https://b.example/x": ("https://b.example/x?utm_source=openai", "https://B.example/x"),
        "https://a.example/": ("https://a.example/", "https://a.example"),
        "https://c.example/": ("https://c.example/#top", "https://c.example/"),
    }
    assert len(plan) == 3
    assert plan.as_of == {"https://a.example/": 5.0}
    assert Plan.of(iter(lists)) == Plan.of(lists, {})


# ------------------------------------------------------------------------------------------------ ok


def test_ok_page_has_the_whole_record(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/article", Reply(body=ARTICLE))
    before = time.time()
    page = one(settings, url)
    assert page.status == "ok"
    assert page.url == page.final_url == url
    assert page.http_status == 200
    assert page.content_type == "text/html"
    assert page.title == "Tram news"
    assert "extend the tram line to the airport" in (page.text or "")
    assert "Zürich welcomed the decision" in (page.text or "")
    assert page.bytes == len(ARTICLE)
    assert page.fetched_at is not None
    assert page.fetched_at >= before
    assert page.error is None
    assert set(page.to_record()) == {"url", "final_url", "status", "http_status", "content_type", "title",
                                     "text", "bytes", "fetched_at", "error", "source", "archived_at", "model"}
    assert page.source == "live" and page.archived_at is None and page.model is None


def test_requests_name_tlmscore_and_keep_the_host_header(server: EvidenceServer, settings: Settings) -> None:
    server.route("/a", Reply(body=ARTICLE))
    url = server.url("/a", host="allowed.test")
    allowed = settings.model_copy(update={"allow_hosts": frozenset({"allowed.test"})})
    assert one(allowed, url, resolver=table_resolver({"allowed.test": ["127.0.0.1"]})).status == "ok"
    (headers,) = server.seen_headers
    assert headers["User-Agent"] == USER_AGENT
    assert "tlmscore" in USER_AGENT
    assert headers["Host"] == f"allowed.test:{server.port}"


def test_a_given_client_is_used_and_left_open(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/a", Reply(body=ARTICLE))

    async def run() -> tuple[Page, bool]:
        async with httpx.AsyncClient(headers={"User-Agent": "custom-agent/1.0"}) as client:
            page = (await Fetcher(settings, client=client).pages([url]))[url]
            return page, client.is_closed

    page, closed = asyncio.run(run())
    assert page.status == "ok"
    assert not closed
    assert server.seen_headers[0]["User-Agent"] == "custom-agent/1.0"


def test_cookies_are_never_sent_back(server: EvidenceServer, settings: Settings) -> None:
    server.route("/check", Reply(body=ARTICLE))
    url = server.route("/login", Reply(302, b"", None, headers={"Set-Cookie": "session=abc", "Location": "/check"}))
    assert one(settings, url).status == "ok"
    assert [("Cookie" in headers) for headers in server.seen_headers] == [False, False]


def test_next_checked_address_is_tried_when_one_refuses(server: EvidenceServer, settings: Settings) -> None:
    server.route("/a", Reply(body=ARTICLE))
    dual = settings.model_copy(update={"allow_hosts": frozenset({"dual.test"}), "retries": 0})
    url = server.url("/a", host="dual.test")
    page = one(dual, url, resolver=table_resolver({"dual.test": ["::1", "127.0.0.1"]}))
    assert page.status == "ok"
    assert server.count("/a") == 1


def test_each_page_is_fetched_once_and_keyed_as_given(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/a", Reply(body=ARTICLE))
    spellings = [url, url + "?utm_source=openai", url + "#section", url.replace("http://", "HTTP://"), url]
    progress: list[tuple[str, int, int]] = []
    pages = fetch(settings, spellings, progress=lambda *event: progress.append(event))
    assert server.count("/a") == 1
    assert list(pages) == list(dict.fromkeys(spellings))
    assert all(page.url == given and page.status == "ok" for given, page in pages.items())
    assert progress == [("fetch", 0, 1), ("fetch", 1, 1)]


def test_pages_stream_as_they_are_done_and_the_dict_keeps_the_given_order(
        server: EvidenceServer, settings: Settings) -> None:
    slow = server.route("/slow", Reply(body=ARTICLE, delay=0.5))
    fast = server.route("/fast", Reply(body=ARTICLE))
    asked = [slow, "", fast, fast + "?utm_source=openai"]

    async def run() -> tuple[list[tuple[str, str]], dict[str, Page]]:
        async with Fetcher(settings) as fetcher:
            order = [(url, page.status) async for url, page in fetcher.pages_as_done(asked)]
            return order, await fetcher.pages(asked)

    order, pages = asyncio.run(run())
    assert order == [("", "blocked"), (fast, "ok"), (fast + "?utm_source=openai", "ok"), (slow, "ok")]
    assert list(pages) == asked
    assert server.count("/slow") == server.count("/fast") == 1  # the second call was served by the cache


def test_text_json_and_pdf_pages(server: EvidenceServer, settings: Settings) -> None:
    urls = [
        server.route("/t.txt", Reply(body="Grüße, 東京".encode(), content_type="text/plain; charset=utf-8")),
        server.route("/d.json", Reply(body=json.dumps({"q": "é"}).encode(), content_type="application/json")),
        server.route("/r.pdf", Reply(body=make_pdf(["Annual revenue rose"], "Report"), content_type="application/pdf")),
    ]
    text, data, pdf = (fetch(settings, urls)[u] for u in urls)
    assert (text.status, text.text) == ("ok", "Grüße, 東京")
    assert (data.status, data.text) == ("ok", '{\n  "q": "é"\n}')
    assert (pdf.status, pdf.title, pdf.content_type) == ("ok", "Report", "application/pdf")
    assert "Annual revenue rose" in (pdf.text or "")


# ------------------------------------------------------------------------------------- HTTP failures


def test_http_error_is_not_retried_for_404(server: EvidenceServer, settings: Settings) -> None:
    page = one(settings, server.route("/gone", Reply(404, b"missing", "text/plain")))
    assert (page.status, page.http_status, page.error) == ("http_error", 404, "HTTP 404 Not Found")
    assert page.text is None
    assert server.count("/gone") == 1


def test_5xx_is_retried_then_succeeds(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/flaky", Reply(500, b"oops"), Reply(502, b"oops"), Reply(body=ARTICLE))
    assert one(settings, url).status == "ok"
    assert server.count("/flaky") == 3


def test_persistent_5xx_gives_up_after_the_retries(server: EvidenceServer, settings: Settings) -> None:
    page = one(settings, server.route("/down", Reply(503, b"busy", "text/plain")))
    assert (page.status, page.http_status, page.error) == ("http_error", 503, "HTTP 503 Service Unavailable")
    assert server.count("/down") == settings.retries + 1


@pytest.mark.parametrize("retry_after", ["60", "http-date"])
def test_429_honours_retry_after_up_to_the_cap(server: EvidenceServer, settings: Settings, retry_after: str) -> None:
    value = formatdate(time.time() + 60, usegmt=True) if retry_after == "http-date" else retry_after
    url = server.route("/busy", Reply(429, b"slow down", headers={"Retry-After": value}), Reply(body=ARTICLE))
    capped = settings.model_copy(update={"retry_after_cap": 0.3, "timeout": 10.0})
    assert one(capped, url).status == "ok"  # asked for 60 s, past the 10 s limit: retried only if capped
    first, second = server.arrivals("/busy")
    assert second - first >= 0.3  # and waited the cap before retrying


def test_backoff_without_retry_after_is_capped(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/busy", *[Reply(503, b"busy")] * 8, Reply(body=ARTICLE))
    patient = settings.model_copy(update={"timeout": 10.0, "retries": 8})
    assert one(patient, url).status == "ok"  # uncapped, six backoffs take 15.75 s or more: past the limit
    arrivals = server.arrivals("/busy")
    assert len(arrivals) == 9
    assert all(later - earlier >= 0.05 for earlier, later in itertools.pairwise(arrivals))  # the fixture's cap


def test_a_retry_after_past_the_deadline_is_not_waited_for(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/busy", Reply(429, b"slow down", headers={"Retry-After": "3600"}), Reply(body=ARTICLE))
    patient = settings.model_copy(update={"timeout": 3.0, "retry_after_cap": 3600.0, "retries": 3})
    page = one(patient, url)
    assert (page.status, page.http_status) == ("http_error", 429)
    assert page.error == "HTTP 429 Too Many Requests (asked to retry after 3600 s, past the page's limit of 3 s)"
    assert server.count("/busy") == 1


def test_one_deadline_covers_every_retry(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/down", Reply(503, b"busy", "text/plain", delay=0.3))
    many = settings.model_copy(update={"timeout": 1.0, "retries": 10})
    page = one(many, url)
    assert page.status == "timeout"
    assert page.error == "timed out after 1 s fetching the page from 127.0.0.1"
    assert 1 <= server.count("/down") < many.retries + 1


def test_one_deadline_covers_every_redirect(server: EvidenceServer, settings: Settings) -> None:
    for n in range(10):
        server.route(f"/r{n}", Reply(302, headers={"Location": f"/r{n + 1}"}, delay=0.3))
    long_chain = settings.model_copy(update={"timeout": 1.0, "max_redirects": 20, "retries": 0})
    page = one(long_chain, server.url("/r0"))
    assert page.status == "timeout"
    assert server.count() < 10


# ------------------------------------------------------------------------------------- slow and big


def test_slow_drip_body_times_out(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/drip", Reply(body=b"<p>" + b"x" * 400, chunk=10, drip=0.1))  # 4 s in all
    quick = settings.model_copy(update={"timeout": 0.3})
    page = one(quick, url)
    assert page.status == "timeout"
    assert "timed out after 0.3 s" in (page.error or "")
    assert server.bodies_sent("/drip") == 0  # gave up before the body was complete


def test_slow_headers_time_out(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/slow", Reply(body=ARTICLE, delay=1.0))
    page = one(settings.model_copy(update={"timeout": 0.2, "retries": 0}), url)
    assert page.status == "timeout"
    assert (page.error or "").startswith("timed out after 0.2 s")


def test_declared_huge_body_is_refused_before_reading(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/big", Reply(body=b"<p>" + b"a" * 5000))
    page = one(settings.model_copy(update={"max_bytes": 1000}), url)
    assert (page.status, page.http_status) == ("too_large", 200)
    assert page.error == "the page is 5,003 bytes, over the limit of 1,000"


def test_undeclared_huge_body_is_cut_off_while_streaming(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/stream", Reply(body=b"<p>" + b"a" * 50_000, send_length=False, chunk=1000))
    page = one(settings.model_copy(update={"max_bytes": 1000}), url)
    assert page.status == "too_large"
    assert page.error == "the page is over the limit of 1,000 bytes"


def test_images_are_unsupported(server: EvidenceServer, settings: Settings) -> None:
    page = one(settings, server.route("/logo.png", Reply(body=b"\x89PNG\r\n\x1a\n" * 10, content_type="image/png")))
    assert (page.status, page.content_type, page.error) == ("unsupported_type", "image/png",
                                                            "unsupported content type image/png")
    assert page.text is None


def test_page_without_text_is_empty(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/blank", Reply(body=b"<html><head><title>t</title></head><body></body></html>"))
    page = one(settings, url)
    assert (page.status, page.error) == ("empty", "no readable text found in the page")


# ----------------------------------------------------------------------------------------- redirects


def redirect(to: str, status: int = 302) -> Reply:
    return Reply(status, b"", None, headers={"Location": to})


def test_redirect_chain_ends_on_the_final_page(server: EvidenceServer, settings: Settings) -> None:
    server.route("/final", Reply(body=ARTICLE))
    server.route("/two", redirect("/final", 301))
    url = server.route("/one", redirect(server.url("/two"), 307))
    page = one(settings, url)
    assert (page.status, page.url, page.final_url) == ("ok", url, server.url("/final"))
    assert [server.count(p) for p in ("/one", "/two", "/final")] == [1, 1, 1]


def test_redirect_loop(server: EvidenceServer, settings: Settings) -> None:
    server.route("/b", redirect("/a"))
    page = one(settings, server.route("/a", redirect("/b")))
    assert page.status == "redirect_loop"
    assert "redirect loop" in (page.error or "")


def test_too_many_redirects(server: EvidenceServer, settings: Settings) -> None:
    for n in range(10):
        server.route(f"/r{n}", redirect(f"/r{n + 1}"))
    page = one(settings.model_copy(update={"max_redirects": 3}), server.url("/r0"))
    assert (page.status, page.error) == ("redirect_loop", "more than 3 redirects")
    assert server.count() == 4


def test_redirect_from_allowed_host_to_loopback_is_blocked(server: EvidenceServer, settings: Settings) -> None:
    secret = server.route("/secret", Reply(body=b"internal admin page"))
    server.route("/hop", redirect(secret))
    allowed = settings.model_copy(update={"allow_hosts": frozenset({"allowed.test"})})
    resolver = table_resolver({"allowed.test": ["127.0.0.1"]})
    page = one(allowed, server.url("/hop", host="allowed.test"), resolver=resolver)
    assert page.status == "blocked"
    assert "127.0.0.1 is a loopback address" in (page.error or "")
    assert server.count("/hop") == 1
    assert server.count("/secret") == 0


# ------------------------------------------------------------------------------------ address guard


@pytest.mark.parametrize(
    "spelling", ["127.0.0.1", "[::1]", "2130706433", "0x7f.1", "127.1", "[::ffff:127.0.0.1]", "localhost"]
)
def test_urls_naming_loopback_are_blocked_with_zero_requests(
    server: EvidenceServer, settings: Settings, spelling: str
) -> None:
    server.route("/admin", Reply(body=ARTICLE))
    nothing_allowed = settings.model_copy(update={"allow_hosts": frozenset()})
    resolver = table_resolver({"localhost": ["127.0.0.1"]})
    page = one(nothing_allowed, f"http://{spelling}:{server.port}/admin", resolver=resolver)
    assert page.status == "blocked"
    assert server.count() == 0


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.7", "169.254.169.254", "fd00::1", "::ffff:192.168.0.1"])
def test_names_resolving_to_internal_addresses_are_blocked(
    server: EvidenceServer, settings: Settings, address: str
) -> None:
    server.route("/", Reply(body=ARTICLE))
    page = one(settings, server.url("/", host="evil.test"), resolver=table_resolver({"evil.test": [address]}))
    assert page.status == "blocked"
    assert f"evil.test resolves to {ipaddress.ip_address(address)}" in (page.error or "")
    assert server.count() == 0


def test_cloud_metadata_address_is_blocked(settings: Settings) -> None:
    page = one(settings, "http://169.254.169.254/latest/meta-data/iam/")
    assert page.status == "blocked"
    assert page.error == "refused: 169.254.169.254 is a link-local address"


@pytest.mark.parametrize("url", ["", "   ", "not a url", "ftp://example.com/x", "javascript:alert(1)", "http://"])
def test_bad_urls_get_a_page_not_an_exception(settings: Settings, url: str) -> None:
    pages = fetch(settings, [url])
    assert pages[url].status == "blocked"
    assert pages[url].url == url
    assert pages[url].error


def test_unknown_host_is_a_dns_error(settings: Settings) -> None:
    page = one(settings, "http://no-such-host.test/a", resolver=table_resolver({}))
    assert page.status == "dns_error"
    assert page.error == "could not resolve no-such-host.test (Name or service not known)"


def test_refused_connection_is_a_connect_error_after_retries(settings: Settings) -> None:
    page = one(settings, f"http://127.0.0.1:{closed_port()}/x")
    assert page.status == "connect_error"
    assert (page.error or "").startswith("could not connect to 127.0.0.1")


# ------------------------------------------------------------------------------- limits and offline


def test_concurrency_limit_is_respected(server: EvidenceServer, settings: Settings) -> None:
    urls = [server.route(f"/p{n}", Reply(body=ARTICLE, hold=3)) for n in range(12)]  # answered three at a time
    limited = settings.model_copy(update={"concurrency": 3, "timeout": 10.0})
    assert all(page.status == "ok" for page in fetch(limited, urls).values())
    assert server.max_in_flight == 3


def test_per_host_limit_is_respected(server: EvidenceServer, settings: Settings) -> None:
    urls = [server.route(f"/h{n}", Reply(body=ARTICLE, hold=2)) for n in range(8)]  # answered two at a time
    limited = settings.model_copy(update={"concurrency": 8, "per_host": 2, "timeout": 10.0})
    assert all(page.status == "ok" for page in fetch(limited, urls).values())
    assert server.max_in_flight == 2


def test_offline_miss_then_offline_hit(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/a", Reply(body=ARTICLE))
    offline = settings.model_copy(update={"offline": True})
    page = one(offline, url)
    assert (page.status, page.error) == ("offline_miss", "not in the cache, and offline mode never fetches")
    assert one(settings, url).status == "ok"
    assert one(offline, url).status == "ok"
    assert server.count() == 1


def test_failures_are_cached_for_failure_ttl(server: EvidenceServer, settings: Settings) -> None:
    url = server.route("/gone", Reply(404, b"", "text/plain"))
    assert one(settings, url).status == "http_error"
    assert one(settings, url).status == "http_error"
    assert server.count("/gone") == 1
    forgetful = settings.model_copy(update={"failure_ttl": 0})
    one(forgetful, url)
    one(forgetful, url)
    assert server.count("/gone") == 3


WARM_RUN = """
import asyncio, json, sys
from pathlib import Path
from tlmscore.evidence.fetch import Fetcher
from tlmscore.settings import Settings

async def main():
    settings = Settings(cache_dir=Path(sys.argv[1]), allow_hosts={"127.0.0.1"})
    async with Fetcher(settings) as fetcher:
        pages = await fetcher.pages(sys.argv[2:])
    print(json.dumps({url: page.status for url, page in pages.items()}))

asyncio.run(main())
"""


def test_second_run_in_a_new_process_makes_no_requests(server: EvidenceServer, settings: Settings) -> None:
    urls = [server.route(f"/doc{n}", Reply(body=ARTICLE)) for n in range(5)]
    urls.append(server.route("/missing", Reply(404, b"", "text/plain")))
    first = fetch(settings, urls)
    assert server.count() == 6
    done = subprocess.run([sys.executable, "-c", WARM_RUN, str(settings.cache_dir), *urls],
                          capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == {url: page.status for url, page in first.items()}
    assert server.count() == 6


def test_a_page_whose_extraction_runs_out_of_time_is_extract_failed(server: EvidenceServer,
                                                                   settings: Settings) -> None:
    slow = "".join(f"<p>Paragraph {n} has words in it to be kept by the extractor.</p>" for n in range(40_000))
    url = server.route("/slow", Reply(body=f"<html><body>{slow}</body></html>".encode()))
    page = one(settings.model_copy(update={"extract_timeout": 0.3}), url)
    assert page.status == "extract_failed"
    assert "CPU" in (page.error or "") and page.text is None


# ------------------------------------------------------------------------- every status, end to end


def cites_every_page(urls: Sequence[str]) -> dict[str, Any]:
    """One logged web search whose answer cites each of `urls` once."""
    text = " ".join(f"Claim {n}." for n in range(len(urls)))
    spans = [(m.start(), m.end()) for m in re.finditer(r"Claim \d+\.", text)]
    return {
        "id": "every-status",
        "request": {"input": "What do these pages say?", "tools": [{"type": "web_search"}]},
        "response": {"id": "resp_every", "object": "response", "model": "gpt-4.1", "output": [
            {"type": "web_search_call", "id": "ws_every", "status": "completed",
             "action": {"type": "search", "query": "pages", "sources": [{"type": "url", "url": u} for u in urls]}},
            {"type": "message", "id": "msg_every", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": text, "annotations": [
                 {"type": "url_citation", "url": url, "title": "Page", "start_index": start, "end_index": end}
                 for url, (start, end) in zip(urls, spans, strict=True)]}]}]},
    }


def prepared_row(settings: Settings, record: dict[str, Any], resolver: Resolver | None = None) -> dict[str, Any]:
    """The row `prepare` gives `record` with a fetcher of `settings` as the page source."""
    async def run() -> dict[str, Any]:
        async with Fetcher(settings, resolver=resolver) as fetcher:
            rows = await aprepare([record], settings, pages=fetcher)
        return dict(rows.iloc[0])

    return asyncio.run(run())


def shown_statuses(prompt: str) -> dict[str, str]:
    """URL -> status of each page the prompt says could not be retrieved; "ok" for each page shown."""
    shown: dict[str, str] = {}
    for result in re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt, re.DOTALL):
        for page in json.loads(result)["output"]:
            content = page.get("content", "")
            failed = re.match(r"This page could not be retrieved \((\w+): ", content)
            shown[page["url"]] = failed.group(1) if failed else "ok"
    return shown


def test_every_page_status_reaches_a_row(server: EvidenceServer, settings: Settings) -> None:
    """Each status the fetcher gives comes from a scripted local server and is told in a prepared row."""
    slow = "".join(f"<p>Paragraph {n} has words in it to be kept by the extractor.</p>" for n in range(40_000))
    held = threading.Event()  # never answered before the page's deadline; let go at the end
    server.route("/loop-b", redirect("/loop-a"))
    expected = {
        server.route("/article", Reply(body=ARTICLE)): "ok",
        server.route("/gone", Reply(404, b"missing", "text/plain")): "http_error",
        server.route("/held", Reply(body=ARTICLE, gate=held)): "timeout",
        f"http://127.0.0.1:{closed_port()}/x": "connect_error",
        "http://no-such-host.test/a": "dns_error",
        "http://169.254.169.254/latest/meta-data/": "blocked",
        server.route("/big", Reply(body=b"<p>" + b"a" * 5_000_000)): "too_large",
        server.route("/logo.png", Reply(body=b"\x89PNG\r\n\x1a\n" * 10, content_type="image/png")): "unsupported_type",
        server.route("/blank", Reply(body=b"<html><head><title>t</title></head><body></body></html>")): "empty",
        server.route("/loop-a", redirect("/loop-b")): "redirect_loop",
        server.route("/slow", Reply(body=f"<html><body>{slow}</body></html>".encode())): "extract_failed",
    }
    online = settings.model_copy(update={"allow_hosts": LOCAL | {"no-such-host.test"}, "max_bytes": 4_000_000,
                                         "extract_timeout": 0.3})
    try:
        row = prepared_row(online, cites_every_page(list(expected)), table_resolver({}))
    finally:
        held.set()
    never_fetched = server.route("/never", Reply(body=ARTICLE))
    offline = settings.model_copy(update={"offline": True})
    offline_row = prepared_row(offline, cites_every_page([never_fetched]))

    assert shown_statuses(row["prompt"]) == expected
    assert shown_statuses(offline_row["prompt"]) == {never_fetched: "offline_miss"}
    assert (row["n_urls"], row["n_urls_ok"], row["n_urls_failed"]) == (11, 1, 10)
    assert "extend the tram line to the airport" in row["prompt"]
    assert {*expected.values(), "offline_miss", "model_failed"} == set(PAGE_STATUSES)  # model_failed: test_chat_pages
    assert server.count("/never") == 0


@pytest.mark.parametrize("module", [fetch_module, cache_module, extract_module])  # the public ones
def test_public_names_are_declared(module: types.ModuleType) -> None:
    """Every public function and class is in `__all__` (ruff's RUF022 keeps `__all__` sorted)."""
    public = {
        name for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    }
    assert public <= set(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)
