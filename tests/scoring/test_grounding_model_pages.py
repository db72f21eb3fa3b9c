"""Pages read by a model, around the run: the command line, the Ray engine's fetch actor, the grounding
scorer's weighing, and a real small model behind llama.cpp's server (the CI tier)."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.evidence.test_chat_pages import READ, WALL, PageModel, chat_settings, record, said, shown
from tests.servers.evidence_server import EvidenceServer, Reply
from tlmscore.cli import main
from tlmscore.evidence._chat_pages import ChatPages
from tlmscore.evidence.page import MemoryPages, Page
from tlmscore.output import ROW_COLUMNS
from tlmscore.settings import Settings


@pytest.fixture
def pages() -> EvidenceServer:
    with EvidenceServer() as running:
        yield running  # type: ignore[misc]


def test_the_command_line_reads_refused_pages_with_a_model(tmp_path: Path, pages: EvidenceServer,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    wall = pages.route("/wall", WALL)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(record([wall])) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with PageModel({wall: said(READ)}) as model:
        code = main(["prepare", str(source), "-o", str(out), "--cache-dir", str(tmp_path / "c"), "--quiet",
                     "--allow-host", "127.0.0.1", "--page-source", "chat", "--page-base-url", model.url,
                     "--page-model", "reader-1", "--page-price-in", "1", "--page-price-out", "1"])
    err = capsys.readouterr().err
    assert code == 0, err
    row = json.loads(out.read_text(encoding="utf-8"))
    assert list(row)[:len(ROW_COLUMNS)] == list(ROW_COLUMNS) and ROW_COLUMNS[-1] == "n_urls_model"
    assert row["n_urls_model"] == 1 and "summarised by reader-1 on" in row["prompt"]
    assert "tlmscore: page model reader-1: 1 requests, one per page" in err
    assert "evidence pages: 1 ok (1 of them a model's summary), 0 unavailable" in err


@pytest.mark.parametrize(("flags", "message"), [
    (["--page-model", "m"], "--page-model: only with --page-source chat or chat:always"),
    (["--page-source", "chat", "--page-model", "m"], "--page-source chat needs --page-base-url"),
    (["--page-source", "chat:always", "--page-base-url", "http://127.0.0.1:9/v1", "--page-model", "m",
      "--page-api-key-env", "TLMSCORE_NO_SUCH_VARIABLE"], "TLMSCORE_NO_SUCH_VARIABLE is not set"),
])
def test_page_model_flags_are_checked_before_the_run(tmp_path: Path, demo_path: Path, flags: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    code = main(["prepare", str(demo_path), "-o", str(out), "--cache-dir", str(tmp_path / "c"), *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == f"tlmscore: error: {message}" or (message in err and len(err.strip().splitlines()) == 1)
    assert not out.exists()


def test_the_ray_fetch_actor_reads_refused_pages_with_the_model(tmp_path: Path, pages: EvidenceServer) -> None:
    """The Ray engine's page actor, called in this process: its page source is the run's, model layer included."""
    pa = pytest.importorskip("pyarrow")
    from tlmscore.ray._pages import FetchPages

    ok, wall = pages.route("/ok", Reply(body=b"<html><body><article><p>" + b"Kept words here. " * 20
                                         + b"</p></article></body></html>")), pages.route("/wall", WALL)
    with PageModel({wall: said(READ)}) as model:
        actor = FetchPages(chat_settings(tmp_path, model))
        try:
            table = actor(pa.table({"url": [ok, wall, wall], "order": [0, 1, 2]}))
            again = actor(pa.table({"url": [wall], "order": [0]}))
        finally:
            actor._run(actor._opened.aclose())
        calls = model.calls
    rows = {row["url"]: row for row in table.to_pylist()}
    assert set(rows) == {ok, wall}
    assert (rows[wall]["status"], rows[wall]["source"], rows[wall]["model"]) == ("ok", "model", "reader-1")
    assert rows[wall]["text"].startswith("The harbour will be dredged") and rows[ok]["source"] == "live"
    assert again.to_pylist()[0]["source"] == "model" and calls == 1
    stored = Page.from_record({k: v for k, v in rows[wall].items() if k not in ("key", "stored_at")})
    assert stored.model == "reader-1"


ANSWER = "The harbour will be dredged in 2027 at a cost of 40 million francs."


def harbour_record(urls: list[str], text: str = ANSWER) -> dict[str, Any]:
    """A web search whose answer states the harbour plan (`text`), citing `urls`."""
    return {
        "id": "harbour",
        "request": {"input": "What is the harbour plan?", "tools": [{"type": "web_search"}]},
        "response": {"id": "resp_h", "object": "response", "model": "gpt-4.1", "output": [
            {"type": "web_search_call", "id": "ws_h", "status": "completed",
             "action": {"type": "search", "query": "harbour", "sources": [{"type": "url", "url": u} for u in urls]}},
            {"type": "message", "id": "msg_h", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": text, "annotations": [
                 {"type": "url_citation", "url": u, "title": "Harbour", "start_index": 0, "end_index": len(text)}
                 for u in urls]}]}]},
    }


def page(url: str, source: str = "live") -> Page:
    text = "Harbour plan. The harbour will be dredged in 2027 at a cost of 40 million francs, the city said."
    return Page(url=url, status="ok", text=text, final_url=url, fetched_at=0.0, source=source,  # type: ignore[arg-type]
                model="reader-1" if source == "model" else None)


def grounded(pages_: list[Page], text: str = ANSWER, **options: Any) -> dict[str, Any]:
    df = tlmscore.score([harbour_record([p.url for p in pages_], text)], "grounding", options=options,
                        pages=MemoryPages(pages_))
    return dict(df.iloc[0])


def weaker(score: float, weight: float = 0.8) -> float:
    """A score above the threshold (0.5) made only of a summary's support: `weight` of its margin kept."""
    return 0.5 + weight * (score - 0.5)


def test_grounding_counts_a_model_summary_as_weaker_evidence() -> None:
    live = grounded([page("https://a.example/plan")])
    summary = grounded([page("https://a.example/plan", "model")])
    both = grounded([page("https://a.example/plan"), page("https://b.example/plan", "model")])
    unweighted = grounded([page("https://a.example/plan", "model")], summary_weight=1.0)
    lighter = grounded([page("https://a.example/plan", "model")], summary_weight=0.5)
    assert live["score"] > 0.9
    assert summary["score"] == pytest.approx(weaker(live["score"]), abs=1e-3)
    assert lighter["score"] == pytest.approx(weaker(live["score"], 0.5), abs=1e-3)
    assert unweighted["score"] == live["score"]
    assert both["score"] == live["score"]  # the page's own text wins over a summary saying the same
    assert summary["details"]["evidence"]["pages_read_by_a_model"] == 1
    assert summary["details"]["summarised_pages"] == [
        {"url": "https://a.example/plan", "note": "summarised by reader-1 on 1970-01-01, not the page itself"}]
    assert "1 page that a model read" in summary["explanation"]
    assert "pages_read_by_a_model" not in live["details"]["evidence"] and "summarised_pages" not in live["details"]


def test_a_claim_a_summary_does_not_support_stays_unsupported() -> None:
    """Weaker evidence in both directions would lift contradicted claims; only support is weakened."""
    wrong = "The harbour will be dredged in 2029 at a cost of 90 million francs."
    live = grounded([page("https://a.example/plan")], wrong)
    summary = grounded([page("https://a.example/plan", "model")], wrong)
    assert live["score"] < 0.5
    assert summary["score"] == live["score"]


def test_grounding_reads_the_mark_from_a_prompt_rendered_elsewhere() -> None:
    """A prompt without render's values (written to a file, read back) keeps the note, and so the weighing."""
    from tlmscore.model import ScoringInput
    from tlmscore.scoring import get_scorer

    rendered = tlmscore.prepare([harbour_record(["https://a.example/plan"])],
                                pages=MemoryPages([page("https://a.example/plan", "model")])).iloc[0]
    plain = ScoringInput(prompt=rendered["prompt"], response=rendered["response"])
    live = tlmscore.prepare([harbour_record(["https://a.example/plan"])],
                            pages=MemoryPages([page("https://a.example/plan")])).iloc[0]
    scorer = get_scorer("grounding")
    weak, strong = asyncio.run(scorer.score_many([plain, ScoringInput(prompt=live["prompt"],
                                                                      response=live["response"])]))
    assert strong.score > 0.9 and weak.score == pytest.approx(weaker(strong.score), abs=1e-3)


# ---------------------------------------------------------------- a real model behind llama.cpp's server


@pytest.mark.system("llama.cpp")
def test_pages_read_by_a_real_model(tmp_path: Path, llama_server: str) -> None:
    """A real small model at llama.cpp's server: each page is read or fails on its own, marked, bounded, cached.

    Gemma 3 270M cannot browse: what it says is no evidence of the page, which is why such text is
    marked as a model's summary. The test holds the plumbing to that: the request shape a real
    server accepts, one request per page, every page a model page or `model_failed`, a rerun free.
    """
    urls = ["http://127.0.0.1:9/harbour-plan", "http://127.0.0.1:9/tram-line", "http://169.254.169.254/"]
    settings = Settings(cache_dir=tmp_path / "cache", allow_hosts={"127.0.0.1"}, page_source="chat:always",
                        page_base_url=llama_server, page_model="gemma-3-270m", page_max_tokens=48,
                        page_concurrency=2, page_timeout=120.0)

    async def read() -> tuple[dict[str, Page], int]:
        async with ChatPages(None, settings) as source:
            found = await source.pages(urls)
            return found, source.sent

    started = time.time()
    found, sent = asyncio.run(read())
    again, sent_again = asyncio.run(read())
    assert sent == 2 and sent_again == 0  # the refused address was never sent; the rerun came from the cache
    assert found[urls[2]].status == "blocked"
    for url in urls[:2]:
        got = found[url]
        assert got.source == "model" and got.model == "gemma-3-270m", got
        assert got.status in ("ok", "model_failed"), got
        assert got.fetched_at is not None and got.fetched_at >= math.floor(started)
        if got.ok:
            assert got.text and len(got.text) <= 20_000
        else:
            assert got.error and "gemma-3-270m could not read it" in got.error
        assert again[url] == got
    row = dict(tlmscore.prepare([record(urls[:2])], settings).iloc[0])
    assert row["n_urls_model"] == sum(1 for u in urls[:2] if found[u].ok)
    for url in urls[:2]:
        entry = shown(row["prompt"])[url]
        assert ("note" in entry) == found[url].ok
