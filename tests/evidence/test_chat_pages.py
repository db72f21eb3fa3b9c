"""Pages that refuse fetchers, read by a model: against a real page server and a fake chat endpoint on 127.0.0.1.

The page server answers 403 to the fetcher where a bot wall would; the chat endpoint answers per
URL (the user message of each request), as a search-augmented model reading that page would.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tests.servers.judge_server import ChatReply, ChatServer, completion
from tlmscore.errors import ConfigError
from tlmscore.evidence._chat_pages import ChatPages, answer_page, model_folder
from tlmscore.evidence._guard import Resolver
from tlmscore.evidence.page import MemoryPages, Page
from tlmscore.settings import Settings

ARTICLE = html_page("Tram news", "The council voted on Tuesday to extend the tram line to the airport by 2031.")
WALL = Reply(403, b"<html><body>Access denied</body></html>")
READ = "Title: Harbour plan\n\nThe harbour will be dredged in 2027 at a cost of 40 million francs."
TODAY = time.strftime("%Y-%m-%d", time.gmtime())


class PageModel(ChatServer):
    """A chat endpoint that answers each request by the URL it asks about (its last message).

    `answers[url]` is a list of replies given in turn (the last one repeats); a URL it does not
    know gets "UNAVAILABLE".
    """

    def __init__(self, answers: dict[str, list[ChatReply]] | None = None) -> None:
        self.answers = answers or {}
        self._turn: dict[str, int] = {}
        self._turns = threading.Lock()
        super().__init__(self._reply)

    def _reply(self, body: dict[str, Any], _n: int) -> ChatReply:
        url = str(body["messages"][-1]["content"])
        replies = self.answers.get(url) or [ChatReply(body=completion("UNAVAILABLE: no such page"))]
        with self._turns:
            turn = self._turn[url] = self._turn.get(url, -1) + 1
        return replies[min(turn, len(replies) - 1)]

    @property
    def asked(self) -> list[str]:
        """The URL of every request, in order."""
        return [str(b["messages"][-1]["content"]) for b in self.bodies]


def said(text: str) -> list[ChatReply]:
    return [ChatReply(body=completion(text))]


def record(urls: Sequence[str], rid: str = "r1") -> dict[str, Any]:
    """One logged web search whose answer cites each of `urls`, one sentence each."""
    text = " ".join(f"Claim {n}." for n in range(len(urls)))
    spans = [(m.start(), m.end()) for m in re.finditer(r"Claim \d+\.", text)]
    return {
        "id": rid,
        "request": {"input": "What do these pages say?", "tools": [{"type": "web_search"}]},
        "response": {"id": f"resp_{rid}", "object": "response", "model": "gpt-4.1", "output": [
            {"type": "web_search_call", "id": "ws_1", "status": "completed",
             "action": {"type": "search", "query": "pages", "sources": [{"type": "url", "url": u} for u in urls]}},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": text, "annotations": [
                 {"type": "url_citation", "url": url, "title": "Page", "start_index": start, "end_index": end}
                 for url, (start, end) in zip(urls, spans, strict=True)]}]}]},
    }


def shown(prompt: str) -> dict[str, dict[str, Any]]:
    """URL -> the page entry the prompt shows for it."""
    entries: dict[str, dict[str, Any]] = {}
    for block in re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt, re.DOTALL):
        for entry in json.loads(block)["output"]:
            entries[entry["url"]] = entry
    return entries


def chat_settings(tmp_path: Path, model: PageModel, **more: Any) -> Settings:
    values: dict[str, Any] = {"cache_dir": tmp_path / "cache", "allow_hosts": {"127.0.0.1"},
                              "extract_workers": 1, "page_source": "chat", "page_base_url": model.url,
                              "page_model": "reader-1", "retries": 0} | more
    return Settings(**values)


def prepared(settings: Settings, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(row) for _, row in tlmscore.prepare(records, settings).iterrows()]


def read_with(source: ChatPages, urls: Sequence[str]) -> dict[str, Page]:
    async def run() -> dict[str, Page]:
        async with source:
            return await source.pages(urls)

    return asyncio.run(run())


@pytest.fixture
def pages() -> EvidenceServer:
    with EvidenceServer() as running:
        yield running  # type: ignore[misc]


def test_pages_that_answer_403_are_read_by_the_model_and_marked(tmp_path: Path, pages: EvidenceServer) -> None:
    ok, wall, other = pages.route("/ok", Reply(body=ARTICLE)), pages.route("/wall", WALL), pages.route("/other", WALL)
    with PageModel({wall: said(READ), other: said("Title: Other\n\nThe ferry runs every hour.")}) as model:
        row = prepared(chat_settings(tmp_path, model), [record([ok, wall, other])])[0]
        asked = model.asked
    entries = shown(row["prompt"])
    assert (row["n_urls"], row["n_urls_ok"], row["n_urls_failed"], row["n_urls_model"]) == (3, 3, 0, 2)
    assert entries[wall]["note"] == f"summarised by reader-1 on {TODAY}, not the page itself"
    assert entries[wall]["title"] == "Harbour plan"
    assert entries[wall]["content"] == "The harbour will be dredged in 2027 at a cost of 40 million francs."
    assert "note" not in entries[ok] and "extend the tram line" in entries[ok]["content"]
    assert sorted(asked) == sorted([wall, other])  # one request per page the fetcher could not get
    assert pages.count("/wall") == 1 and pages.count("/ok") == 1  # the fetcher tried first


def test_a_rerun_sends_no_request_and_gives_the_same_prompt(tmp_path: Path, pages: EvidenceServer) -> None:
    wall = pages.route("/wall", WALL)
    with PageModel({wall: said(READ)}) as model:
        settings = chat_settings(tmp_path, model)
        first = prepared(settings, [record([wall])])[0]
        again = prepared(settings, [record([wall])])[0]
        offline = prepared(settings.model_copy(update={"offline": True}), [record([wall])])[0]
        calls = model.calls
    assert calls == 1
    assert first["prompt"] == again["prompt"] == offline["prompt"]
    assert offline["n_urls_model"] == 1
    assert any(model_folder(settings).iterdir())


def test_the_cache_is_per_model(tmp_path: Path, pages: EvidenceServer) -> None:
    wall = pages.route("/wall", WALL)
    with PageModel({wall: said(READ)}) as model:
        settings = chat_settings(tmp_path, model)
        prepared(settings, [record([wall])])
        other = prepared(settings.model_copy(update={"page_model": "reader-2"}), [record([wall])])[0]
        calls = model.calls
    assert calls == 2
    assert "summarised by reader-2" in other["prompt"]


def test_failures_stay_with_their_page(tmp_path: Path, pages: EvidenceServer) -> None:
    broken, refused, empty, garbled, good = (pages.route(f"/{name}", WALL)
                                             for name in ("broken", "refused", "empty", "garbled", "good"))
    with PageModel({broken: [ChatReply(500, {"error": "boom"})], refused: said("UNAVAILABLE: a paywall"),
                    empty: said("Title: Nothing\n\n"), garbled: [ChatReply(200, "not a completion")],
                    good: said(READ)}) as model:
        row = prepared(chat_settings(tmp_path, model), [record([broken, refused, empty, garbled, good])])[0]
    entries = shown(row["prompt"])
    assert (row["n_urls_ok"], row["n_urls_model"]) == (1, 1)
    assert entries[good]["content"].startswith("The harbour will be dredged")
    assert "page model endpoint returned an unexpected body" in entries[garbled]["content"]
    for url in (broken, refused, empty, garbled):
        assert entries[url]["content"].startswith("This page could not be retrieved (http_error: HTTP 403")
        assert "note" not in entries[url]
    assert "page model endpoint returned HTTP 500" in entries[broken]["content"]
    assert "it answered that it could not (a paywall)" in entries[refused]["content"]
    assert "its answer held no text" in entries[empty]["content"]


def test_a_429_is_retried_after_the_time_it_asks(tmp_path: Path, pages: EvidenceServer) -> None:
    wall = pages.route("/wall", WALL)
    busy = ChatReply(429, {"error": "slow down"}, {"Retry-After": "0.2"})
    with PageModel({wall: [busy, *said(READ)]}) as model:
        row = prepared(chat_settings(tmp_path, model, retries=2), [record([wall])])[0]
        calls = model.calls
    assert calls == 2 and row["n_urls_model"] == 1


def test_requests_in_flight_are_bounded(tmp_path: Path, pages: EvidenceServer) -> None:
    walls = [pages.route(f"/w{n}", WALL) for n in range(8)]
    with PageModel({url: said(READ) for url in walls}) as model:
        model.latency = 0.05
        row = prepared(chat_settings(tmp_path, model, page_concurrency=3), [record(walls)])[0]
        most = model.max_in_flight
    assert row["n_urls_model"] == len(walls)
    assert 1 <= most <= 3


def local_names(table: dict[str, str]) -> Resolver:
    async def resolve(host: str, _port: int) -> Sequence[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [table[host]]

    return resolve


REFUSED = ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.7/admin", "http://[::1]/",
           "http://internal.test/x", "http://wiki.internal/secret", "http://intranet/home", "file:///etc/passwd"]


def test_a_refused_address_never_reaches_the_model(tmp_path: Path, pages: EvidenceServer) -> None:
    """Every mode: the guard's refusals, and names that do not resolve here but name a private host."""
    public = "http://news.example/story"
    with PageModel({public: said(READ)}) as model:
        settings = chat_settings(tmp_path, model, page_source="chat:always", allow_hosts=frozenset())
        resolver = local_names({"internal.test": "127.0.0.1", "news.example": "93.184.215.14"})
        found = read_with(ChatPages(None, settings, resolver=resolver), [*REFUSED, public])
        below = MemoryPages([Page(url=u, status="http_error", error="HTTP 403") for u in REFUSED])
        layered = read_with(ChatPages(below, settings.model_copy(update={"page_source": "chat"}), resolver=resolver),
                            REFUSED)
        fetched_first = prepared(chat_settings(tmp_path, model, allow_hosts=frozenset()), [record(REFUSED[:3])])[0]
        asked = model.asked
    assert asked == [public]
    assert found[public].ok and found[public].source == "model"
    for url in REFUSED:
        assert found[url].status == "blocked", url
        assert found[url].error and found[url].error.startswith("not sent to the page model"), found[url].error
        assert layered[url].status == "http_error" and "not sent to the page model" in (layered[url].error or "")
    assert fetched_first["n_urls_model"] == 0 and fetched_first["n_urls_failed"] == 3


def test_chat_always_never_fetches(tmp_path: Path, pages: EvidenceServer) -> None:
    ok = pages.route("/ok", Reply(body=ARTICLE))
    with PageModel({ok: said(READ)}) as model:
        row = prepared(chat_settings(tmp_path, model, page_source="chat:always"), [record([ok])])[0]
    assert pages.count() == 0
    assert row["n_urls_model"] == 1 and shown(row["prompt"])[ok]["note"].startswith("summarised by reader-1")


def test_a_page_the_model_cannot_read_is_model_failed_in_the_prompt(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/gone"  # never fetched: chat:always asks the model alone
    with PageModel({url: said("UNAVAILABLE: the site is down")}) as model:
        settings = chat_settings(tmp_path, model, page_source="chat:always")
        row = prepared(settings, [record([url])])[0]
    content = shown(row["prompt"])[url]["content"]
    assert content.startswith("This page could not be retrieved (model_failed: the page model reader-1 could not "
                              "read it: it answered that it could not (the site is down))")
    assert (row["n_urls_ok"], row["n_urls_failed"], row["n_urls_model"]) == (0, 1, 0)


def test_chat_always_and_a_page_source_of_ones_own_do_not_go_together(tmp_path: Path) -> None:
    with PageModel() as model:
        settings = chat_settings(tmp_path, model, page_source="chat:always")
        with pytest.raises(ConfigError, match="chat:always"):
            tlmscore.prepare([record(["http://127.0.0.1:9/"])], settings, pages=MemoryPages())
        calls = model.calls
    assert calls == 0


def test_a_caller_source_is_the_layer_below(tmp_path: Path) -> None:
    """`prepare(pages=...)` with `page_source="chat"`: the model reads what that source lacks."""
    held, missing = "http://127.0.0.1:9/held", "http://127.0.0.1:9/missing"
    with PageModel({missing: said(READ)}) as model:
        settings = chat_settings(tmp_path, model)
        rows = tlmscore.prepare([record([held, missing])], settings, pages=MemoryPages({held: "Kept text."}))
        asked = model.asked
    assert asked == [missing] and int(rows.iloc[0]["n_urls_model"]) == 1


def test_the_cost_is_logged_and_max_cost_refuses_before_a_request(tmp_path: Path, pages: EvidenceServer,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    walls = [pages.route(f"/w{n}", WALL) for n in range(3)]
    with PageModel({url: said(READ) for url in walls}) as model:
        priced = chat_settings(tmp_path, model, page_price_in=1.0, page_price_out=1.0, page_price_request=0.005)
        with caplog.at_level(logging.INFO, logger="tlmscore"):
            prepared(priced, [record(walls[:1])])
        with pytest.raises(ConfigError, match=r"page model: estimated cost \$.* is above max_cost"):
            prepared(priced.model_copy(update={"page_max_cost": 0.01}), [record(walls[1:])])
        with pytest.raises(ConfigError, match="no price is known for model 'reader-1'"):
            prepared(priced.model_copy(update={"page_price_in": None, "page_price_out": None,
                                               "page_max_cost": 1.0}), [record(walls[1:])])
        calls = model.calls
    assert calls == 1
    logged = [r.getMessage() for r in caplog.records if "page model reader-1" in r.getMessage()]
    assert logged and "1 requests, one per page" in logged[0] and "at most about $0.00" in logged[0]


@pytest.mark.parametrize(("answer", "status", "title", "text"), [
    (READ, "ok", "Harbour plan", "The harbour will be dredged in 2027 at a cost of 40 million francs."),
    ("**Title:** Harbour plan\nDredging in 2027.", "ok", "Harbour plan", "Dredging in 2027."),
    ("No title line, only text.", "ok", None, "No title line, only text."),
    ("<think>Let me look.</think>Title: T\n\nText.", "ok", "T", "Text."),
    ("unavailable - blocked by a captcha", "model_failed", None, None),
    ("  ", "model_failed", None, None),
    ("Title: Only a title", "model_failed", None, None),
    ("Title: A\x00B\n\nSee [the rest](http://169.254.169.254/) \x07here.", "ok", "AB",
     "See [the rest](http://169.254.169.254/) here."),
])
def test_an_answer_becomes_a_page(answer: str, status: str, title: str | None, text: str | None) -> None:
    page = answer_page("https://a.example/", answer, "reader-1", 0.0)
    assert (page.status, page.title, page.text) == (status, title, text)
    assert page.source == "model" and page.model == "reader-1"
    assert (page.error is None) == (status == "ok")


def test_an_answer_is_cut_to_size() -> None:
    page = answer_page("https://a.example/", "Title: " + "t" * 1000 + "\n\n" + "word " * 100_000, "m", 0.0)
    assert len(page.title or "") == 300 and len(page.text or "") == 20_000


def test_the_settings_need_an_endpoint_and_a_model() -> None:
    with pytest.raises(ValueError, match="page_base_url and page_model"):
        Settings(page_source="chat", page_model="m")
    with pytest.raises(ValueError, match="http:// or https://"):
        Settings(page_source="chat", page_model="m", page_base_url="ftp://x")


def test_a_named_key_goes_to_the_endpoint_and_a_missing_one_is_an_error(
        tmp_path: Path, pages: EvidenceServer, monkeypatch: pytest.MonkeyPatch) -> None:
    wall = pages.route("/wall", WALL)
    with PageModel({wall: said(READ)}) as model:
        monkeypatch.setenv("TLMSCORE_TEST_PAGE_KEY", "sk-page-test")
        prepared(chat_settings(tmp_path, model, page_api_key_env="TLMSCORE_TEST_PAGE_KEY"), [record([wall])])
        prepared(chat_settings(tmp_path / "b", model), [record([wall])])
        headers = model.headers
        monkeypatch.delenv("TLMSCORE_TEST_PAGE_KEY")
        with pytest.raises(ConfigError, match="TLMSCORE_TEST_PAGE_KEY is not set"):
            prepared(chat_settings(tmp_path, model, page_api_key_env="TLMSCORE_TEST_PAGE_KEY"), [record([wall])])
    assert headers[0].get("authorization") == "Bearer sk-page-test"
    assert "authorization" not in headers[1]
    assert all("sk-page-test" not in json.dumps(b) for b in model.bodies)

