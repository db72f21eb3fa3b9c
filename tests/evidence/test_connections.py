"""Connections: pooled by origin and kept alive (https too), per-host limits, proxies and trust.

The fetcher's own client checks addresses where connections are made, so a connection serves one
origin (scheme, host, port) and is kept for its next request. A caller's own client is sent to
the checked address instead, with a connection of its own per https request. These tests hold
both, and the network flags, against real servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest
import trustme

from tests.conftest import TLS_NAMES
from tests.evidence.test_fetch import table_resolver
from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tests.servers.proxy_server import ProxyServer
from tlmscore.cli import main
from tlmscore.evidence._download import Slots
from tlmscore.evidence._guard import Resolver
from tlmscore.evidence.fetch import Fetcher
from tlmscore.evidence.page import Page
from tlmscore.settings import Settings

NAMES = TLS_NAMES
PAGE = html_page("Harbour news", "The ferry to the island now runs every twenty minutes in summer.")
LOCAL = table_resolver({name: ["127.0.0.1"] for name in (*NAMES, "c.test", "localhost")})


@pytest.fixture
def ca_file(tmp_path: Path, authority: trustme.CA) -> Path:
    path = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(path))
    return path


def settings_for(tmp_path: Path, *hosts: str, **changes: object) -> Settings:
    values: dict[str, object] = {"cache_dir": tmp_path / "cache", "allow_hosts": frozenset(hosts), "concurrency": 1,
                                 "timeout": 5.0, "connect_timeout": 5.0, "retries": 0, "extract_workers": 1}
    return Settings(**{**values, **changes})  # type: ignore[arg-type]


def fetch(
    settings: Settings, urls: Sequence[str], *, client: httpx.AsyncClient | None = None, resolver: Resolver = LOCAL
) -> dict[str, Page]:
    """Fetch `urls` (by default names resolved to 127.0.0.1), through `client` when one is given."""

    async def run() -> dict[str, Page]:
        if client is None:
            async with Fetcher(settings, resolver=resolver) as fetcher:
                return await fetcher.pages(urls)
        async with client, Fetcher(settings, resolver=resolver, client=client) as fetcher:
            return await fetcher.pages(urls)

    return asyncio.run(run())


def trusting_client(authority: trustme.CA, **options: object) -> httpx.AsyncClient:
    context = ssl.create_default_context()
    authority.configure_trust(context)
    return httpx.AsyncClient(verify=context, **options)  # type: ignore[arg-type]


def test_plain_http_keeps_one_connection_per_origin(tmp_path: Path) -> None:
    with EvidenceServer() as server:
        for path in ("/1", "/2", "/3"):
            server.route(path, Reply(body=PAGE))
        urls = [server.url("/1", "a.test"), server.url("/2", "b.test"), server.url("/3", "a.test")]
        pages = fetch(settings_for(tmp_path, *NAMES), urls)
        assert [pages[u].status for u in urls] == ["ok", "ok", "ok"]
        assert server.count() == 3
        assert server.connections == 2
        hosts = [h["Host"] for h in server.seen_headers]
        assert hosts == [f"a.test:{server.port}", f"b.test:{server.port}", f"a.test:{server.port}"]


def test_two_https_requests_to_one_host_share_one_tls_connection(
    tmp_path: Path, tls_server: EvidenceServer, ca_file: Path
) -> None:
    for path in ("/1", "/2", "/3"):
        tls_server.route(path, Reply(body=PAGE))
    urls = [tls_server.url("/1", "a.test"), tls_server.url("/2", "a.test"), tls_server.url("/3", "b.test")]
    pages = fetch(settings_for(tmp_path, *NAMES, ca_bundle=ca_file), urls)
    assert [pages[u].status for u in urls] == ["ok", "ok", "ok"]
    assert tls_server.count() == 3
    assert tls_server.connections == 2
    assert tls_server.server_names == ["a.test", "b.test"]
    assert all(h.get("Connection") != "close" for h in tls_server.seen_headers)


def test_https_refuses_a_certificate_for_another_name(
    tmp_path: Path, tls_server: EvidenceServer, ca_file: Path
) -> None:
    url = tls_server.route("/1", Reply(body=PAGE)).replace("127.0.0.1", "c.test")
    page = fetch(settings_for(tmp_path, "c.test", ca_bundle=ca_file), [url])[url]
    assert page.status == "connect_error"
    assert "certificate" in (page.error or "").lower()
    assert tls_server.server_names == ["c.test"]
    assert tls_server.count() == 0


@pytest.mark.parametrize("store", ["system", "certifi"])
def test_the_fetchers_trust_stores_refuse_an_unknown_authority(
    tmp_path: Path, tls_server: EvidenceServer, store: str
) -> None:
    url = tls_server.route("/1", Reply(body=PAGE)).replace("127.0.0.1", "a.test")
    page = fetch(settings_for(tmp_path, "a.test", trust_store=store), [url])[url]
    assert page.status == "connect_error"
    assert "certificate" in (page.error or "").lower()
    assert tls_server.count() == 0


def test_the_system_store_trusts_what_the_system_bundle_lists(
    tmp_path: Path, tls_server: EvidenceServer, ca_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system store is OpenSSL's default bundle on Linux (`SSL_CERT_FILE` names it here):
    the local authority in it is trusted, and every connection is verified for its name."""
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    urls = [tls_server.route(f"/{n}", Reply(body=PAGE)).replace("127.0.0.1", name)
            for n, name in enumerate(("a.test", "b.test", "a.test"))]
    pages = fetch(settings_for(tmp_path, "a.test", "b.test", trust_store="system"), urls)
    assert [pages[url].status for url in urls] == ["ok", "ok", "ok"]
    assert set(tls_server.server_names) == {"a.test", "b.test"}


def test_a_callers_client_gets_an_https_connection_per_request_verified_for_its_name(
    tmp_path: Path, tls_server: EvidenceServer, authority: trustme.CA
) -> None:
    for path in ("/1", "/2", "/3"):
        tls_server.route(path, Reply(body=PAGE))
    urls = [tls_server.url("/1", "a.test"), tls_server.url("/2", "b.test"), tls_server.url("/3", "a.test")]
    pages = fetch(settings_for(tmp_path, *NAMES), urls, client=trusting_client(authority))
    assert [pages[u].status for u in urls] == ["ok", "ok", "ok"]
    assert tls_server.connections == 3
    assert tls_server.server_names == ["a.test", "b.test", "a.test"]
    assert all(h.get("Connection") == "close" for h in tls_server.seen_headers)


def test_a_callers_client_that_follows_redirects_still_has_every_hop_checked(tmp_path: Path) -> None:
    with EvidenceServer() as server:
        secret = server.route("/secret", Reply(body=PAGE))
        server.route("/hop", Reply(302, headers={"Location": secret}))
        url = server.url("/hop", "a.test")
        page = fetch(settings_for(tmp_path, "a.test"), [url], client=httpx.AsyncClient(follow_redirects=True))[url]
        assert page.status == "blocked"
        assert "127.0.0.1 is a loopback address" in (page.error or "")
        assert server.count("/hop") == 1
        assert server.count("/secret") == 0


def test_connections_stay_alive_when_a_batch_spans_more_servers_than_the_concurrency(tmp_path: Path) -> None:
    """The concurrency limit bounds requests in flight, not idle connections: with two requests at
    a time over three servers, each server's connection is kept for its next request rather than
    closed to make room for another server's."""
    settings = settings_for(tmp_path, "127.0.0.1", concurrency=2, per_host=1)
    with EvidenceServer() as one, EvidenceServer() as two, EvidenceServer() as three:
        servers = (one, two, three)
        urls = [server.route(f"/{n}", Reply(body=PAGE)) for n in range(3) for server in servers]
        pages = fetch(settings, urls)
        assert {pages[u].status for u in urls} == {"ok"}
        assert [server.count() for server in servers] == [3, 3, 3]
        assert [server.connections for server in servers] == [1, 1, 1]


# ------------------------------------------------------------------------------ the command line

def write_batch(path: Path, urls: Sequence[str]) -> Path:
    """One Responses API record whose answer cites `urls`."""
    annotations = [{"type": "url_citation", "url": u, "title": "t", "start_index": 0, "end_index": 4} for u in urls]
    record = {"request": {"model": "gpt-4.1", "input": "What changed?", "tools": [{"type": "web_search"}]},
              "response": {"id": "resp_1", "object": "response", "model": "gpt-4.1", "created_at": 1_700_000_000,
                           "output": [{"type": "web_search_call", "id": "ws_1", "status": "completed",
                                       "action": {"type": "search", "query": "ferries",
                                                  "sources": [{"type": "url", "url": u} for u in urls]}},
                                      {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                                       "content": [{"type": "output_text", "text": "Ferries [1].",
                                                    "annotations": annotations}]}]}}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def prepare(tmp_path: Path, urls: Sequence[str], *flags: str) -> dict[str, object]:
    out = tmp_path / "out.jsonl"
    tmp_path.mkdir(parents=True, exist_ok=True)
    batch = write_batch(tmp_path / "batch.jsonl", urls)
    code = main(["prepare", str(batch), "-o", str(out), "--cache-dir", str(tmp_path / "cache"), "--quiet", *flags])
    assert code == 0
    row: dict[str, object] = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    return row


def test_per_host_bounds_the_connections_open_at_once_to_a_host(tmp_path: Path) -> None:
    with EvidenceServer() as server:
        urls = [server.route(f"/{n}", Reply(body=PAGE, delay=0.2)) for n in range(8)]
        row = prepare(tmp_path, urls, "--allow-host", "127.0.0.1", "--per-host", "2", "--concurrency", "32")
        assert row["n_urls_ok"] == 8
        assert server.count() == 8
        assert server.max_open_connections == 2
        assert server.connections == 2


def test_ca_bundle_makes_tls_trust_that_authority(tmp_path: Path, ca_file: Path, authority: trustme.CA) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(context)
    with EvidenceServer(tls=context) as server:
        url = server.route("/1", Reply(body=PAGE)).replace("127.0.0.1", "localhost")
        untrusted = prepare(tmp_path / "a", [url], "--allow-host", "localhost")
        trusted = prepare(tmp_path / "b", [url], "--allow-host", "localhost", "--ca-bundle", str(ca_file))
    assert (untrusted["n_urls_ok"], untrusted["n_urls_failed"]) == (0, 1)
    assert (trusted["n_urls_ok"], trusted["n_urls_failed"]) == (1, 0)
    assert "twenty minutes" in str(trusted["prompt"])


def test_timeout_bounds_a_page_that_asks_to_retry_much_later(tmp_path: Path) -> None:
    with EvidenceServer() as server:
        url = server.route("/busy", Reply(429, b"slow down", "text/plain", headers={"Retry-After": "3600"}))
        row = prepare(tmp_path, [url], "--allow-host", "127.0.0.1", "--timeout", "2")
        assert (row["n_urls_ok"], row["n_urls_failed"]) == (0, 1)
        assert "asked to retry after 3600 s, past the page's limit of 2 s" in str(row["prompt"])
        assert server.count("/busy") == 1


# ----------------------------------------------------------------------------------------- proxies

@pytest.fixture
def proxy() -> Iterator[ProxyServer]:
    """A forward proxy that resolves the test names (the fetcher's resolver knows none of them)."""
    with ProxyServer(dict.fromkeys(NAMES, "127.0.0.1")) as running:
        yield running


def test_http_goes_through_the_proxy_in_absolute_form(tmp_path: Path, proxy: ProxyServer) -> None:
    with EvidenceServer() as server:
        urls = [server.route(p, Reply(body=PAGE)).replace("127.0.0.1", "a.test") for p in ("/1", "/2")]
        pages = fetch(settings_for(tmp_path, proxy=proxy.url), urls, resolver=table_resolver({}))
        assert [pages[u].status for u in urls] == ["ok", "ok"]
        assert proxy.seen == [f"GET {url} HTTP/1.1" for url in urls]
        assert server.count() == 2


def test_https_goes_through_the_proxy_in_a_tunnel_verified_for_the_host(
    tmp_path: Path, proxy: ProxyServer, tls_server: EvidenceServer, ca_file: Path
) -> None:
    urls = [tls_server.route(p, Reply(body=PAGE)).replace("127.0.0.1", "b.test") for p in ("/1", "/2")]
    settings = settings_for(tmp_path, proxy=proxy.url, ca_bundle=ca_file)
    pages = fetch(settings, urls, resolver=table_resolver({}))
    assert [pages[u].status for u in urls] == ["ok", "ok"]
    assert proxy.seen == [f"CONNECT b.test:{tls_server.port} HTTP/1.1"]  # one tunnel, kept alive
    assert tls_server.server_names == ["b.test"]


def test_behind_a_proxy_the_guard_refuses_what_it_can_still_see(tmp_path: Path, proxy: ProxyServer) -> None:
    """An IP literal in a private range, and a name that resolves here to one, never reach the proxy."""
    with EvidenceServer() as server:
        literal = server.route("/1", Reply(body=PAGE))
        named = literal.replace("127.0.0.1", "a.test")
        private = "http://10.1.2.3/admin"
        pages = fetch(settings_for(tmp_path, proxy=proxy.url), [literal, named, private],
                      resolver=table_resolver({"a.test": ["127.0.0.1"]}))
        assert [pages[u].status for u in (literal, named, private)] == ["blocked"] * 3
        assert "a.test resolves to 127.0.0.1" in (pages[named].error or "")
        assert proxy.seen == []
        assert server.count() == 0


def test_environment_proxies_are_used_only_when_trusted(
    tmp_path: Path, proxy: ProxyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "b.test")
    with EvidenceServer() as server:
        first, second = (server.route(p, Reply(body=PAGE)).replace("127.0.0.1", "a.test") for p in ("/1", "/2"))
        bypassed = server.route("/3", Reply(body=PAGE)).replace("127.0.0.1", "b.test")
        ignored = fetch(settings_for(tmp_path / "a", "a.test"), [first])
        assert ignored[first].status == "ok"
        assert proxy.seen == []
        trusted = fetch(settings_for(tmp_path / "b", "b.test", trust_env=True), [second, bypassed],
                        resolver=table_resolver({"b.test": ["127.0.0.1"]}))
        assert [trusted[u].status for u in (second, bypassed)] == ["ok", "ok"]
        assert proxy.seen == [f"GET {second} HTTP/1.1"]


# ------------------------------------------------------------------------------ who gets a free slot

SITES = table_resolver({name: ["127.0.0.1"] for name in ("big.test", "one.test", "two.test")})


def test_the_site_with_the_most_pages_waiting_is_served_first(tmp_path: Path) -> None:
    """A batch's big site, whose pages go `per_host` at a time, is the longest chain of requests: a
    free slot goes to it while it has the most pages waiting, not to the request that asked first.
    With one request at a time the order the server sees is the order slots were given."""
    settings = settings_for(tmp_path, "big.test", "one.test", "two.test", concurrency=1, per_host=6)
    with EvidenceServer() as server:
        sites = {"/one": "one.test", "/two": "two.test", **{f"/big{n}": "big.test" for n in range(1, 5)}}
        for path in sites:
            server.route(path, Reply(body=PAGE))
        paths = list(sites)  # cited in this order: the small sites first
        pages = fetch(settings, [server.url(path, sites[path]) for path in paths], resolver=SITES)
        assert {page.status for page in pages.values()} == {"ok"}
        order = sorted(paths, key=lambda p: server.arrivals(p)[0])
    # the big site while it has more waiting than any other; then, as many waiting each, the site
    # served least recently first
    assert order == ["/big1", "/big2", "/big3", "/one", "/two", "/big4"]


def test_a_request_cancelled_while_waiting_for_a_slot_takes_none() -> None:
    """A page whose deadline ends while it waits gives up its place; a slot is given back however
    its request ends, so the next request to the host gets it."""

    async def run() -> list[str]:
        slots = Slots(total=1, per_host=1)
        seen: list[str] = []

        async def request(name: str, fail: bool = False) -> None:
            async with slots.slot("a.test"):
                seen.append(name)
                await asyncio.sleep(0)
                if fail:
                    raise OSError("reset")

        first = asyncio.ensure_future(request("first", fail=True))
        waiting = asyncio.ensure_future(request("cancelled"))
        last = asyncio.ensure_future(request("last"))
        await asyncio.sleep(0)
        waiting.cancel()
        # a slot left taken would hold "last" and "after" for ever: bounded here
        await asyncio.wait_for(asyncio.gather(first, waiting, last, return_exceptions=True), 5)
        await asyncio.wait_for(request("after"), 5)
        return seen

    assert asyncio.run(run()) == ["first", "last", "after"]


def test_a_run_of_plain_http_pages_makes_no_tls_context(tmp_path: Path) -> None:
    """The trust store is loaded when the first https origin needs it, not for every run: with a
    CA bundle that cannot be loaded, plain http pages still come, and an https page fails alone."""
    bundle = tmp_path / "not-a-bundle.pem"
    bundle.write_text("no certificate here\n", encoding="utf-8")
    settings = settings_for(tmp_path, "127.0.0.1", "a.test", ca_bundle=bundle)
    with EvidenceServer() as plain:
        url = plain.route("/1", Reply(body=PAGE))
        page = fetch(settings, [url])[url]
        assert page.status == "ok"
        secure = "https://a.test:1/x"  # the context is made before any connection: no server needed
        failed = fetch(settings, [url, secure])
    assert failed[url].status == "ok"
    assert failed[secure].status == "connect_error"
