"""Other formats: Chat Completions, search-augmented chat (Perplexity), xAI, and OpenAI Batch API files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tlmscore import MemoryPages, Page, Settings, prepare, read_transcripts
from tlmscore.convert import convert_transcript
from tlmscore.model import ToolCall, WebResult
from tlmscore.rendering._prompt import render_prompt, render_response

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ITEMS = FIXTURES / "items.jsonl"
BATCH_IN, BATCH_OUT = FIXTURES / "batch_input.jsonl", FIXTURES / "batch_output.jsonl"


def record(record_id: str) -> Any:
    (t,) = [t for t in read_transcripts(ITEMS) if t.id == record_id]
    return t


def search_pair(conv: Any) -> tuple[ToolCall, WebResult]:
    (call,) = [t for t in conv.turns if isinstance(t, ToolCall)]
    (result,) = [t for t in conv.turns if isinstance(t, WebResult)]
    return call, result


def test_search_results_become_a_web_search_pair_with_titles_and_cited_claims() -> None:
    conv = convert_transcript(record("perplexity-search-results"))
    call, result = search_pair(conv)
    assert call.name == "web_search_call" and call.server
    assert call.arguments == {"query": "How tall is the Eiffel Tower and how many people visit it?"}
    assert [(r.url, r.title) for r in result.refs] == [
        ("https://en.wikipedia.org/wiki/Eiffel_Tower", "Eiffel Tower - Wikipedia"),
        ("https://www.toureiffel.paris/en/news/history", "History of the Eiffel Tower"),
        ("https://www.britannica.com/topic/Eiffel-Tower-Paris-France", "Eiffel Tower | Britannica")]
    assert result.refs[0].cited[0].startswith("The Eiffel Tower is 330 metres tall")
    assert [d["name"] for d in conv.tools] == ["web_search_call"]


def test_citation_objects_are_used_when_there_are_no_search_results(tmp_path: Path) -> None:
    url = "https://science.nasa.gov/mission/webb/"
    pages = MemoryPages([Page(url=url, status="ok", title="Webb", text="Webb launched on 25 December 2021.")])
    df = prepare(ITEMS, Settings(offline=True, cache_dir=tmp_path), pages=pages).set_index("id")
    row = df.loc["search-citation-objects"]
    assert row.n_urls == 1 and row.n_urls_ok == 1
    assert "Webb launched on 25 December 2021." in row.prompt
    assert row.response == "It launched on December 25, 2021.[1]"


def test_perplexity_corpus_records_cite_their_pages(corpus_responses: Path) -> None:
    for name in ("perplexity-citations.json", "perplexity-text.json"):
        (t,) = read_transcripts(corpus_responses / name)
        conv = convert_transcript(t)
        _, result = search_pair(conv)
        citations = json.loads((corpus_responses / name).read_text(encoding="utf-8"))["citations"]
        assert result.refs and {r.url for r in result.refs} <= set(citations)
        assert conv.urls


def test_chat_records_without_search_keep_the_reference_chat_format() -> None:
    compat = pytest.importorskip("tlmscore.compat")
    pytest.importorskip("cleanlab_tlm")
    from cleanlab_tlm.utils.chat import form_prompt_string, form_response_string_chat_completions_api

    t = record("chat-tool-calls")
    conv = convert_transcript(t)
    assert conv.style == "chat"
    expected = form_prompt_string(t.request["messages"], t.request["tools"])
    assert render_prompt(conv) == expected == compat.form_prompt_string(t.request["messages"], t.request["tools"])
    assert render_response(conv) == form_response_string_chat_completions_api(t.response["choices"][0]["message"])


def test_xai_searches_with_arguments_and_citations_without_indices() -> None:
    conv = convert_transcript(record("xai-web-search"))
    calls = [t for t in conv.turns if isinstance(t, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("web_search_call", {"query": "Gateway Arch height"}),
        ("open_page", {"url": "https://www.nps.gov/jeff/planyourvisit/gateway-arch-facts.htm"})]
    assert conv.urls == ("https://en.wikipedia.org/wiki/Gateway_Arch",
                         "https://www.nps.gov/jeff/planyourvisit/gateway-arch-facts.htm")
    assert conv.warnings == ()
    x = convert_transcript(record("xai-x-search"))
    call, result = search_pair(x)
    assert call.name == "x_keyword_search" and call.arguments["query"] == "Raspberry Pi 6 launch"
    assert [r.url for r in result.refs] == ["https://x.com/i/status/1991234567890123456",
                                            "https://x.com/i/status/1991234567890654321"]
    assert [d["name"] for d in x.tools] == ["x_keyword_search"]


def test_batch_output_lines_are_joined_to_their_input_lines() -> None:
    joined = {t.raw["custom_id"]: t for t in read_transcripts(BATCH_OUT, batch_inputs=[BATCH_IN])}
    assert joined["faq-0001"].request["input"] == "What is the capital of Portugal?"
    assert joined["faq-0002"].request["messages"] == [{"role": "user", "content": "Name one prime above 100."}]
    assert joined["faq-0003"].error is not None and "rate_limit_exceeded" in joined["faq-0003"].error
    alone = {t.raw["custom_id"]: t for t in read_transcripts(BATCH_OUT)}
    assert alone["faq-0001"].request == {}


def test_prepare_uses_the_batch_inputs_setting(tmp_path: Path) -> None:
    settings = Settings(offline=True, cache_dir=tmp_path, batch_inputs=(BATCH_IN,))
    df = prepare(BATCH_OUT, settings, pages=MemoryPages())
    assert list(df.error.notna()) == [True, False, False]
    assert df.prompt[1] == "System: Answer in one sentence.\n\nUser: What is the capital of Portugal?\n\nAssistant:"
    assert df.prompt[2] == "Name one prime above 100."
    assert df.response[2] == "101 is a prime number above 100."


def test_a_missing_batch_input_file_is_an_error(tmp_path: Path) -> None:
    from tlmscore.errors import TranscriptError

    with pytest.raises(TranscriptError, match="no such batch input file"):
        list(read_transcripts(BATCH_OUT, batch_inputs=[tmp_path / "nope.jsonl"]))
