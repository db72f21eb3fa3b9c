"""Evidence as of the answer: a local fake of a Wayback-compatible archive, and the layered page sources."""

from __future__ import annotations

import asyncio
import calendar
import json
import threading
import time
import types
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tlmscore import MemoryPages, Settings, prepare
from tlmscore._urls import url_key
from tlmscore.cli import main
from tlmscore.evidence import layers as sources_module
from tlmscore.evidence import page as page_module
from tlmscore.evidence._archive import ArchivePages, availability_url, wayback_time
from tlmscore.evidence.fetch import Fetcher
from tlmscore.evidence.layers import LayeredPages, open_page_source
from tlmscore.evidence.page import AsOf, Page


def stamp(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y%m%d%H%M%S")))


class FakeArchive:
    """An archive on 127.0.0.1: the availability API names the closest snapshot on either side
    (as the Wayback Machine's does), and `/web/<timestamp>id_/<url>` serves a snapshot."""

    def __init__(self) -> None:
        self.snapshots: dict[str, dict[str, bytes]] = {}
        self.asked: list[str] = []
        archive = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                archive.asked.append(self.path)
                status, body, kind = archive.answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 -- the stdlib's name
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add(self, url: str, when: str, text: str) -> None:
        self.snapshots.setdefault(url, {})[when] = html_page(f"Archived {when}", text)

    def answer(self, path: str) -> tuple[int, bytes, str]:
        parts = urlsplit(path)
        if parts.path == "/wayback/available":
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            return 200, json.dumps(self.available(query["url"], query.get("timestamp"))).encode(), "application/json"
        if parts.path.startswith("/web/"):
            when, _, url = path[len("/web/"):].partition("id_/")
            body = self.snapshots.get(url, {}).get(when)
            if body is not None:
                return 200, body, "text/html; charset=utf-8"
        return 404, b"not archived", "text/plain"

    def available(self, url: str, timestamp: str | None) -> dict[str, object]:
        held = sorted(self.snapshots.get(url, {}))
        if not held:
            return {"url": url, "archived_snapshots": {}}
        target = stamp(timestamp) if timestamp else time.time()
        closest = min(held, key=lambda s: (abs(stamp(s) - target), s))
        return {"url": url, "archived_snapshots": {"closest": {
            "status": "200", "available": True, "timestamp": closest,
            "url": f"http://web.archive.example/web/{closest}/{url}"}}}

    def __enter__(self) -> FakeArchive:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def archive() -> Iterator[FakeArchive]:
    with FakeArchive() as running:
        yield running


def resolve_to_loopback(names: Sequence[str]) -> object:
    async def resolve(host: str, _port: int) -> list[str]:
        if host in names:
            return ["127.0.0.1"]
        raise OSError(-2, "Name or service not known")

    return resolve


def archived(settings: Settings, urls: list[str], as_of: AsOf | None = None,
             resolver: object = None) -> dict[str, Page]:
    async def run() -> dict[str, Page]:
        async with Fetcher(settings, resolver=resolver) as fetcher:  # type: ignore[arg-type]
            return await ArchivePages(fetcher, settings).pages(urls, as_of)

    return asyncio.run(run())


def make_settings(tmp_path: Path, archive: FakeArchive, mode: str = "fallback", **more: object) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", archive=mode, archive_url=archive.base,  # type: ignore[arg-type]
                    allow_hosts={"127.0.0.1"}, retries=0, **more)  # type: ignore[arg-type]


SNAPSHOTS = ("20240101000000", "20240301000000", "20240601000000")


def test_addresses_follow_the_wayback_api() -> None:
    assert wayback_time(stamp("20240301123456")) == "20240301123456"
    assert (availability_url("https://web.archive.org/", "https://a.example/x?y=1", stamp("20240301000000"))
            == "https://web.archive.org/wayback/available?url=https%3A%2F%2Fa.example%2Fx%3Fy%3D1"
               "&timestamp=20240301000000")


@pytest.mark.parametrize(("answered", "chosen"), [
    ("20240302000000", "20240301000000"),  # just after a snapshot: that one
    ("20240531000000", "20240301000000"),  # just before a later one: the closest is after, so asked again
    ("20240101000000", "20240101000000"),  # at a snapshot's time exactly
])
def test_a_failed_page_comes_from_the_snapshot_at_or_before_the_answer(
        tmp_path: Path, archive: FakeArchive, server: EvidenceServer, answered: str, chosen: str) -> None:
    url = server.route("/gone", Reply(403, b"bot wall", "text/html"))
    for when in SNAPSHOTS:
        archive.add(url, when, f"The snapshot taken at {when} says the ferry runs hourly.")
    page = archived(make_settings(tmp_path, archive), [url], {url_key(url): stamp(answered)})[url]
    assert page.status == "ok" and page.source == "archive"
    assert page.archived_at == stamp(chosen)
    assert f"taken at {chosen}" in (page.text or "")
    assert page.url == url and (page.final_url or "").startswith(f"{archive.base}/web/{chosen}id_/")


def test_no_snapshot_from_before_the_answer_keeps_the_live_failure(tmp_path: Path, archive: FakeArchive,
                                                                    server: EvidenceServer) -> None:
    url = server.route("/gone", Reply(404, b"", "text/html"))
    archive.add(url, "20250101000000", "Written after the answer.")
    page = archived(make_settings(tmp_path, archive), [url], {url_key(url): stamp("20240101000000")})[url]
    assert page.status == "http_error" and page.source == "live" and page.text is None
    assert "no snapshot from before the answer" in (page.error or "")


def test_fallback_leaves_live_pages_alone_and_prefer_reads_the_archive_first(
        tmp_path: Path, archive: FakeArchive, server: EvidenceServer) -> None:
    server.route("/page", Reply(body=html_page("Live", "The live page has changed since.")))
    server.route("/new", Reply(body=html_page("New", "Only on the live web.")))
    url, unarchived = server.url("/page", host="site.test"), server.url("/new", host="site.test")
    archive.add(url, "20240101000000", "What the page said when the answer was given.")
    as_of = {url_key(url): stamp("20240102000000"), url_key(unarchived): stamp("20240102000000")}
    resolver = resolve_to_loopback(["site.test"])

    def run(mode: str, cache: str) -> dict[str, Page]:
        settings = Settings(cache_dir=tmp_path / cache, archive=mode, archive_url=archive.base,  # type: ignore[arg-type]
                            allow_hosts={"127.0.0.1", "site.test"}, retries=0)
        return archived(settings, [url, unarchived], as_of, resolver)

    live, preferred = run("fallback", "a"), run("prefer", "b")
    assert [live[url].source, live[unarchived].source] == ["live", "live"]
    assert "changed since" in (live[url].text or "")
    assert preferred[url].source == "archive" and "when the answer was given" in (preferred[url].text or "")
    assert preferred[unarchived].source == "live" and preferred[unarchived].status == "ok"


@pytest.mark.parametrize("mode", ["prefer", "fallback"])
def test_a_public_archive_is_never_told_of_a_private_host(tmp_path: Path, archive: FakeArchive,
                                                          server: EvidenceServer, mode: str) -> None:
    private = server.route("/private", Reply(503, b"", "text/html"))
    intranet = "http://wiki/ferry"  # a single-label name that does not resolve here
    port = urlsplit(archive.base).port
    settings = Settings(cache_dir=tmp_path / "cache", archive=mode,  # type: ignore[arg-type]
                        archive_url=f"http://archive.test:{port}", allow_hosts={"127.0.0.1", "archive.test"},
                        retries=0)
    found = archived(settings, [private, intranet], {}, resolve_to_loopback(["archive.test"]))
    assert [found[private].status, found[intranet].status] == ["http_error", "dns_error"]
    assert archive.asked == []


def test_an_archive_of_ones_own_may_be_asked_about_private_hosts(tmp_path: Path, archive: FakeArchive,
                                                                 server: EvidenceServer) -> None:
    url = server.route("/private", Reply(503, b"", "text/html"))  # 127.0.0.1, as is the archive
    archive.add(url, "20240101000000", "The mirror kept it.")
    page = archived(make_settings(tmp_path, archive), [url], {url_key(url): stamp("20240102000000")})[url]
    assert page.source == "archive" and "The mirror kept it." in (page.text or "")


def test_an_archive_that_is_down_keeps_the_live_failure(tmp_path: Path, server: EvidenceServer) -> None:
    url = server.route("/gone", Reply(503, b"", "text/html"))
    with FakeArchive() as down:
        settings = make_settings(tmp_path, down)
    page = archived(settings, [url], {url_key(url): stamp("20240101000000")})[url]
    assert page.status == "http_error"
    assert "the archive could not be asked (connect_error" in (page.error or "")


def test_an_archive_on_a_loopback_address_must_be_allowed(tmp_path: Path, archive: FakeArchive,
                                                          server: EvidenceServer) -> None:
    server.route("/gone", Reply(403, b"", "text/html"))
    url = server.url("/gone", host="site.test")
    archive.add(url, "20240101000000", "Archived text.")
    settings = Settings(cache_dir=tmp_path / "cache", archive="fallback", archive_url=archive.base, retries=0,
                        allow_hosts={"site.test"})
    page = archived(settings, [url], {url_key(url): stamp("20240102000000")}, resolve_to_loopback(["site.test"]))[url]
    assert page.status == "http_error" and "blocked" in (page.error or "") and "loopback" in (page.error or "")
    assert archive.asked == []


def test_archived_pages_are_cached_like_any_page(tmp_path: Path, archive: FakeArchive,
                                                 server: EvidenceServer) -> None:
    url = server.route("/gone", Reply(410, b"", "text/html"))
    archive.add(url, "20240101000000", "Archived once, read twice.")
    settings = make_settings(tmp_path, archive)
    as_of = {url_key(url): stamp("20240102000000")}
    first = archived(settings, [url], as_of)[url]
    asked = len(archive.asked)
    second = archived(settings.model_copy(update={"offline": True}), [url], as_of)[url]
    assert first.status == second.status == "ok" and second.source == "archive"
    assert len(archive.asked) == asked  # served from the cache, offline


def _record(n: int, url: str, created_at: int) -> dict[str, object]:
    return {"id": f"r{n}", "request": {"input": "How often does the ferry run?"}, "response": {
        "id": f"resp_{n}", "object": "response", "model": "gpt-4.1", "created_at": created_at, "output": [
            {"type": "web_search_call", "id": f"ws_{n}", "status": "completed",
             "action": {"type": "search", "query": "ferry", "sources": [{"type": "url", "url": url}]}},
            {"type": "message", "id": f"m{n}", "role": "assistant", "status": "completed", "content": [
                {"type": "output_text", "text": "Hourly.", "annotations": [
                    {"type": "url_citation", "url": url, "title": "Ferry", "start_index": 0, "end_index": 6}]}]}]}}


def test_a_batch_reads_each_page_as_of_the_earliest_answer_citing_it(tmp_path: Path, archive: FakeArchive,
                                                                     server: EvidenceServer) -> None:
    url = server.route("/ferry", Reply(404, b"", "text/html"))
    for when in SNAPSHOTS:
        archive.add(url, when, f"Timetable archived {when}.")
    records = [_record(1, url, int(stamp("20240605000000"))), _record(2, url, int(stamp("20240305000000")))]
    df = prepare(records, make_settings(tmp_path, archive))
    assert list(df.n_urls_ok) == [1, 1]
    assert all("Timetable archived 20240301000000." in prompt for prompt in df.prompt)


def test_the_command_line_reads_the_archive_when_asked(tmp_path: Path, archive: FakeArchive,
                                                       server: EvidenceServer) -> None:
    url = server.route("/ferry", Reply(429, b"", "text/html"))
    archive.add(url, "20240301000000", "The ferry ran hourly in March.")
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(_record(1, url, int(stamp("20240305000000")))) + "\n", encoding="utf-8")
    common = [str(log), "--allow-host", "127.0.0.1", "--quiet", "--archive-url", archive.base]
    assert main(["prepare", *common, "-o", str(tmp_path / "off.jsonl"), "--cache-dir", str(tmp_path / "a")]) == 0
    assert main(["prepare", *common, "-o", str(tmp_path / "on.jsonl"), "--cache-dir", str(tmp_path / "b"),
                 "--archive", "fallback"]) == 0
    (off,) = [json.loads(line) for line in (tmp_path / "off.jsonl").read_text(encoding="utf-8").splitlines()]
    (on,) = [json.loads(line) for line in (tmp_path / "on.jsonl").read_text(encoding="utf-8").splitlines()]
    assert off["n_urls_ok"] == 0 and "ran hourly" not in off["prompt"]
    assert on["n_urls_ok"] == 1 and "The ferry ran hourly in March." in on["prompt"]
    assert sum("/wayback/available" in path for path in archive.asked) == 1  # only the run that asked


# ------------------------------------------------------------------------------------------ layers


def test_layers_answer_in_order_and_the_last_one_answers_what_none_has() -> None:
    first = MemoryPages({"https://a.example/": "from the first layer"})
    second = MemoryPages({"https://a.example/": "hidden", "https://b.example/": "from the second layer"})
    found = asyncio.run(LayeredPages(first, second).pages(["https://b.example/", "https://a.example/", "https://c.example/"]))
    assert list(found) == ["https://b.example/", "https://a.example/", "https://c.example/"]
    assert found["https://a.example/"].text == "from the first layer"
    assert found["https://b.example/"].text == "from the second layer"
    assert found["https://c.example/"].status == "offline_miss"


def test_page_files_come_before_the_callers_source(tmp_path: Path) -> None:
    saved = tmp_path / "pages.jsonl"
    saved.write_text(json.dumps(Page(url="https://a.example/", status="ok", text="from the page file").to_record())
                     + "\n", encoding="utf-8")
    given = MemoryPages({"https://a.example/": "from the caller", "https://b.example/": "only the caller has it"})

    async def run() -> dict[str, Page]:
        settings = Settings(cache_dir=tmp_path / "never", page_files=(saved,))
        async with open_page_source(settings, given=given) as source:
            return await source.pages(["https://a.example/", "https://b.example/"])

    found = asyncio.run(run())
    assert found["https://a.example/"].text == "from the page file"
    assert found["https://b.example/"].text == "only the caller has it"
    assert not (tmp_path / "never").exists()  # a caller's source takes the place of the cache and the web


@pytest.mark.parametrize("module", [page_module, sources_module])  # the public ones
def test_public_names_are_declared(module: types.ModuleType) -> None:
    public = {name for name, value in vars(module).items()
              if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__}
    assert public <= set(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)
