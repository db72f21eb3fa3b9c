"""Connections: plain http is kept alive across names; https is verified per name and never shared.

The fetcher connects to the address the guard checked and sends the name as `Host` (and, for
https, as the TLS server name), so one pooled connection could in principle serve several names.
That is harmless for plain http and wrong for https; these tests hold both against real servers.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from pathlib import Path

import httpx
import trustme

from tests.conftest import TLS_NAMES
from tests.evidence_server import EvidenceServer, Reply, html_page
from tests.test_fetch import table_resolver
from tlmscore.evidence.fetch import Fetcher
from tlmscore.evidence.page import Page
from tlmscore.settings import Settings

NAMES = TLS_NAMES
PAGE = html_page("Harbour news", "The ferry to the island now runs every twenty minutes in summer.")


def settings_for(tmp_path: Path, *hosts: str) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", allow_hosts=frozenset(hosts), concurrency=1, timeout=5.0,
                    connect_timeout=5.0, retries=0, extract_workers=1)


def fetch(settings: Settings, urls: Sequence[str], trust: trustme.CA | None = None) -> dict[str, Page]:
    """Fetch `urls` (names resolved to 127.0.0.1); with `trust`, through a client that trusts that authority."""
    resolver = table_resolver({name: ["127.0.0.1"] for name in (*NAMES, "c.test")})

    async def run() -> dict[str, Page]:
        if trust is None:
            async with Fetcher(settings, resolver=resolver) as fetcher:
                return await fetcher.pages(urls)
        trusting = ssl.create_default_context()
        trust.configure_trust(trusting)
        client = httpx.AsyncClient(verify=trusting)  # would keep connections alive if let
        async with client, Fetcher(settings, resolver=resolver, client=client) as fetcher:
            return await fetcher.pages(urls)

    return asyncio.run(run())


def test_plain_http_reuses_one_connection_for_every_name_on_an_address(tmp_path: Path) -> None:
    with EvidenceServer() as server:
        for path in ("/1", "/2", "/3"):
            server.route(path, Reply(body=PAGE))
        urls = [server.url("/1", "a.test"), server.url("/2", "b.test"), server.url("/3", "a.test")]
        pages = fetch(settings_for(tmp_path, *NAMES), urls)
        assert [pages[u].status for u in urls] == ["ok", "ok", "ok"]
        assert server.count() == 3
        assert server.connections == 1
        hosts = [h["Host"] for h in server.seen_headers]
        assert hosts == [f"a.test:{server.port}", f"b.test:{server.port}", f"a.test:{server.port}"]


def test_https_gets_a_connection_of_its_own_per_request_verified_for_its_name(
    tmp_path: Path, tls_server: EvidenceServer, authority: trustme.CA
) -> None:
    for path in ("/1", "/2", "/3"):
        tls_server.route(path, Reply(body=PAGE))
    urls = [tls_server.url("/1", "a.test"), tls_server.url("/2", "b.test"), tls_server.url("/3", "a.test")]
    pages = fetch(settings_for(tmp_path, *NAMES), urls, authority)
    assert [pages[u].status for u in urls] == ["ok", "ok", "ok"]
    assert "twenty minutes" in (pages[urls[1]].text or "")
    assert tls_server.connections == 3
    assert tls_server.server_names == ["a.test", "b.test", "a.test"]
    assert all(h.get("Connection") == "close" for h in tls_server.seen_headers)


def test_https_refuses_a_certificate_for_another_name(
    tmp_path: Path, tls_server: EvidenceServer, authority: trustme.CA
) -> None:
    url = tls_server.route("/1", Reply(body=PAGE)).replace("127.0.0.1", "c.test")
    page = fetch(settings_for(tmp_path, "c.test"), [url], authority)[url]
    assert page.status == "connect_error"
    assert "certificate" in (page.error or "").lower()
    assert tls_server.server_names == ["c.test"]
    assert tls_server.count() == 0


def test_the_fetchers_own_client_verifies_certificates(tmp_path: Path, tls_server: EvidenceServer) -> None:
    """The test authority is not a public one, so the fetcher's own client must refuse it."""
    url = tls_server.route("/1", Reply(body=PAGE)).replace("127.0.0.1", "a.test")
    page = fetch(settings_for(tmp_path, "a.test"), [url])[url]
    assert page.status == "connect_error"
    assert "certificate" in (page.error or "").lower()
    assert tls_server.count() == 0


def test_connections_stay_alive_when_a_batch_spans_more_servers_than_the_concurrency(tmp_path: Path) -> None:
    """The concurrency limit bounds requests in flight, not idle connections: with two requests at
    a time over three servers, each server's connection is kept for its next request rather than
    closed to make room for another server's."""
    settings = settings_for(tmp_path, "127.0.0.1").model_copy(update={"concurrency": 2, "per_host": 1})
    with EvidenceServer() as one, EvidenceServer() as two, EvidenceServer() as three:
        servers = (one, two, three)
        urls = [server.route(f"/{n}", Reply(body=PAGE)) for n in range(3) for server in servers]
        pages = fetch(settings, urls)
        assert {pages[u].status for u in urls} == {"ok"}
        assert [server.count() for server in servers] == [3, 3, 3]
        assert [server.connections for server in servers] == [1, 1, 1]
