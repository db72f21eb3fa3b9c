# ruff: noqa: RUF001  # full-width punctuation is what Chinese and Japanese answers are written with
"""Citations of every style map to the sentence they close and to their numbered source (fidelity #2, #7).

Records are written in the providers' real shapes: Perplexity (`citations`, `search_results`), xAI
(`url_citation` without indices, `[[n]](url)` markers), OpenAI Responses (`url_citation` with
indices), OpenAI search models through Chat Completions (`message.annotations[].url_citation`).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from tlmscore import Page, read_transcripts
from tlmscore.convert import cited_sentence, convert_transcript
from tlmscore.convert._citations import message_citations, sentence_ends
from tlmscore.model import Conversation, Evidence, ScoringInput, ToolCall, WebResult
from tlmscore.rendering import render

WIKI = "https://en.wikipedia.org/wiki/Eiffel_Tower"
SITE = "https://www.toureiffel.paris/en"
BRIT = "https://www.britannica.com/topic/Eiffel-Tower"
ZH = "https://zh.wikipedia.org/wiki/%E5%9F%83%E8%8F%B2%E5%B0%94%E9%93%81%E5%A1%94"


def chat_record(content: str, extra: dict[str, Any], question: str = "How tall is the Eiffel Tower?") -> Any:
    response = {"id": "pplx-1", "object": "chat.completion", "created": 1770768226, "model": "sonar",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}], **extra}
    (t,) = read_transcripts([{"request": {"model": "sonar", "messages": [{"role": "user", "content": question}]},
                              "response": response}])
    return t


def results(*rows: tuple[str, str, str, str]) -> list[dict[str, str]]:
    return [{"title": title, "url": url, "date": date, "snippet": snippet} for url, title, date, snippet in rows]


def web_results(conv: Conversation) -> list[WebResult]:
    return [t for t in conv.turns if isinstance(t, WebResult)]


def tool_response(prompt: str, index: int = 0) -> Any:
    return json.loads(prompt.split("<tool_response>\n")[index + 1].split("\n</tool_response>", 1)[0])


def pages(*found: tuple[str, str]) -> dict[str, Page]:
    return {url: Page(url=url, status="ok", text=text, final_url=url) for url, text in found}


def test_markers_after_the_full_stop_cite_the_sentence_they_close() -> None:
    text = "Alpha is tall.[1] Beta is short.[2][3] Gamma is wide[3]. Delta."
    ends = sentence_ends(text)
    one, run = text.index("[1]"), text.index("[2][3]")
    assert cited_sentence(text, one, one + 3, ends) == "Alpha is tall.[1]"
    assert cited_sentence(text, run + 3, run + 6, ends) == "Beta is short.[2][3]"
    inside = text.index("[3].")
    assert cited_sentence(text, inside, inside + 3, ends) == "Gamma is wide[3]."


def test_cjk_sentence_ends_and_abbreviations() -> None:
    text = "埃菲尔铁塔高330米。[1]它于1889年建成！[2]游客很多？[3]"
    ends = sentence_ends(text)
    two = text.index("[2]")
    assert cited_sentence(text, two, two + 3, ends) == "它于1889年建成！[2]"
    ja = "エッフェル塔の高さは330メートルです。[[1]](https://ja.wikipedia.org/wiki/x)次の文。"
    mark = ja.index("[[1]]")
    assert cited_sentence(ja, mark, mark + 5) == "エッフェル塔の高さは330メートルです。[[1]](https://ja.wikipedia.org/wiki/x)"
    arabic = "ما ارتفاع البرج؟ يبلغ 330 مترا.[1]"
    mark = arabic.index("[1]")
    assert cited_sentence(arabic, mark, mark + 3) == "يبلغ 330 مترا.[1]"
    us = "The U.S. data from St. Louis say 827,526.[2] Next."
    at = us.index("[2]")
    assert cited_sentence(us, at, at + 3) == "The U.S. data from St. Louis say 827,526.[2]"
    units = "It is 330 m. J. Smith built it in 1889, e.g. with iron."
    assert cited_sentence(units, units.index("Smith"), units.index("Smith") + 5) == \
        "J. Smith built it in 1889, e.g. with iron."


def test_perplexity_sources_keep_their_numbers_snippets_and_dates() -> None:
    answer = "The Eiffel Tower is 330 m tall.[1] It was the tallest structure until 1930.[2][3]"
    t = chat_record(answer, {"citations": [WIKI, SITE, BRIT], "search_results": results(
        (WIKI, "Eiffel Tower - Wikipedia", "2002-02-25", "The tower is 330 metres tall."),
        (SITE, "3", "2025-11-02", "Until 1930 it was the tallest man-made structure."),
        (BRIT, "Eiffel Tower | Britannica", "2025-12-30", "Nearly 6 million visitors a year."))})
    conv = convert_transcript(t)
    (result,) = web_results(conv)
    assert [(r.number, r.url, r.title) for r in result.refs] == [
        (1, WIKI, "Eiffel Tower - Wikipedia"), (2, SITE, None), (3, BRIT, "Eiffel Tower | Britannica")]
    assert result.refs[0].cited == ("The Eiffel Tower is 330 m tall.[1]",)
    assert result.refs[2].cited == ("It was the tallest structure until 1930.[2][3]",)
    scored = render(conv, {**pages((WIKI, "The Eiffel Tower is 330 metres tall.")),
                           SITE: Page(url=SITE, status="timeout", error="timed out")})
    entries = tool_response(scored.prompt)["output"]
    assert [e["citation"] for e in entries] == ["[1]", "[2]", "[3]"]
    assert entries[1] == {"citation": "[2]", "url": SITE, "date": "2025-11-02",
                          "snippet": "Until 1930 it was the tallest man-made structure.",
                          "content": entries[1]["content"]}
    assert entries[1]["content"].startswith("This page could not be retrieved (timeout")
    assert conv.warnings == ()


def test_the_logged_snippet_is_the_evidence_when_the_page_cannot_be_fetched() -> None:
    t = chat_record("It is 330 m tall.[1]", {"search_results": results(
        (WIKI, "Eiffel Tower", "2002-02-25", "The tower is 330 metres tall."))})
    scored = render(convert_transcript(t), {})
    assert scored.evidence is not None
    (page,) = scored.evidence
    assert (page.kind, page.available, page.status, page.origin) == ("page", True, "offline_miss", "log")
    assert page.text == "The tower is 330 metres tall." and page.number == 1 and page.date == "2002-02-25"
    assert [scored.response[a:b] for a, b in page.cited] == ["It is 330 m tall.[1]"]


def test_a_marker_without_a_source_is_warned_about() -> None:
    t = chat_record("Alpha.[1] Beta.[5]", {"citations": [WIKI, SITE, BRIT, "https://example.org/4"]})
    conv = convert_transcript(t)
    assert "the answer cites [5], but no logged source has that number" in conv.warnings
    assert [r.url for r in web_results(conv)[0].refs] == [WIKI]


def test_chinese_answer_and_evidence_keep_their_sentences() -> None:
    answer = "埃菲尔铁塔高330米。[1]它每年接待约六百万游客。[2]"
    t = chat_record(answer, {"citations": [ZH, SITE]}, question="埃菲尔铁塔有多高？")
    conv = convert_transcript(t)
    scored = render(conv, pages((ZH, "埃菲尔铁塔是位于巴黎的铁塔，高330米。"), (SITE, "每年约有六百万游客。")))
    assert scored.evidence is not None
    zh, site = scored.evidence
    assert "埃菲尔铁塔是位于巴黎的铁塔，高330米。" in scored.prompt
    assert [scored.response[a:b] for a, b in zh.cited] == ["埃菲尔铁塔高330米。[1]"]
    assert [scored.response[a:b] for a, b in site.cited] == ["它每年接待约六百万游客。[2]"]
    assert (zh.number, zh.origin, zh.text) == (1, "live", "埃菲尔铁塔是位于巴黎的铁塔，高330米。")


def test_openai_search_models_through_chat_completions_make_a_search_pair() -> None:
    content = "The Eiffel Tower is 330 m tall ([wikipedia.org](https://en.wikipedia.org/wiki/Eiffel_Tower))."
    start = content.index("([")
    message = {"role": "assistant", "content": content, "refusal": None, "annotations": [
        {"type": "url_citation", "url_citation": {"start_index": start, "end_index": len(content) - 1,
                                                  "title": "Eiffel Tower", "url": WIKI}}]}
    response = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-search-preview",
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "message": message}]}
    ChatCompletion.model_validate(response)
    (t,) = read_transcripts([{"request": {"model": "gpt-4o-search-preview", "web_search_options": {},
                                          "messages": [{"role": "user", "content": "How tall?"}]},
                              "response": response}])
    conv = convert_transcript(t)
    call = next(turn for turn in conv.turns if isinstance(turn, ToolCall))
    (result,) = web_results(conv)
    assert call.name == "web_search_call" and call.arguments == {"query": "How tall?"}
    assert [(r.url, r.title, r.cited) for r in result.refs] == [(WIKI, "Eiffel Tower", (content,))]
    assert conv.warnings == ()
    scored = render(conv, pages((WIKI, "It is 330 metres tall.")))
    assert scored.evidence is not None and scored.evidence[0].cited == ((0, len(content)),)
    assert scored.response == content


def xai_response(text: str, annotations: list[dict[str, Any]], calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "xai-1", "object": "response", "created_at": 1762189566, "model": "grok-4-fast-reasoning",
            "status": "completed", "tools": [{"type": "web_search"}, {"type": "x_search"}],
            "parallel_tool_calls": True, "tool_choice": "auto",
            "output": [*calls, {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                                "content": [{"type": "output_text", "text": text, "logprobs": [],
                                             "annotations": annotations}]}]}


def xai_call(kind: str, name: str, arguments: dict[str, Any], n: int) -> dict[str, Any]:
    return {"type": kind, "name": name, "arguments": json.dumps(arguments), "call_id": "", "id": f"fc_{n}",
            "status": "completed"}


def test_xai_markers_number_the_pages_and_web_pages_go_to_the_web_search() -> None:
    post = "https://x.com/i/status/1991234567890123456"
    text = (f"エッフェル塔は330メートルです。[[1]]({WIKI}) 投稿でも話題です。[[2]]({post})")
    anns = [{"type": "url_citation", "url": WIKI}, {"type": "url_citation", "url": post}]
    calls = [xai_call("x_search_call", "x_keyword_search", {"query": "Eiffel"}, 0),
             xai_call("web_search_call", "web_search", {"query": "Eiffel height"}, 1)]
    response = xai_response(text, anns, calls)
    (t,) = read_transcripts([{"request": {"model": "grok-4", "input": "高さは？"}, "response": response}])
    conv = convert_transcript(t)
    by_name = {r.name: r for r in web_results(conv)}
    assert [(r.number, r.url) for r in by_name["web_search_call"].refs] == [(1, WIKI)]
    assert [(r.number, r.url) for r in by_name["x_keyword_search"].refs] == [(2, post)]
    assert by_name["web_search_call"].refs[0].cited == (f"エッフェル塔は330メートルです。[[1]]({WIKI})",)
    assert conv.warnings == ()


def test_xai_browse_page_keeps_its_instructions_and_focuses_on_them() -> None:
    call = xai_call("web_search_call", "browse_page", {"url": WIKI, "instructions": "Find the height"}, 0)
    (t,) = read_transcripts([{"request": {"input": "Height?"},
                              "response": xai_response("It is 330 m.", [{"type": "url_citation", "url": WIKI}],
                                                       [call])}])
    conv = convert_transcript(t)
    opened = next(turn for turn in conv.turns if isinstance(turn, ToolCall))
    assert opened.arguments == {"url": WIKI, "instructions": "Find the height"}
    assert web_results(conv)[0].focus == ("Find the height",)


def responses_record(output: list[dict[str, Any]], history: list[dict[str, Any]] | None = None) -> Any:
    response = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5", "status": "completed",
                "output": output, "tools": [{"type": "web_search"}], "parallel_tool_calls": True,
                "tool_choice": "auto"}
    Response.model_validate(response)
    (t,) = read_transcripts([{"request": {"model": "gpt-5", "input": history or "Question?",
                                          "tools": [{"type": "web_search"}],
                                          "include": ["web_search_call.action.sources"]},
                              "response": response}])
    return t


def answer(text: str, annotations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": annotations}]}


def search_call(call_id: str, sources: list[str] | None, status: str = "completed", **action: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "search", "query": "q", **action}
    if sources is not None:
        body["sources"] = [{"type": "url", "url": u} for u in sources]
    return {"type": "web_search_call", "id": call_id, "status": status, "action": body}


def url_cite(text: str, phrase: str, url: str, title: str = "T") -> dict[str, Any]:
    start = text.index(phrase)
    return {"type": "url_citation", "url": url, "title": title, "start_index": start,
            "end_index": start + len(phrase)}


def test_arabic_answer_cites_its_page_with_spans_in_the_rendered_response() -> None:
    text = "يبلغ ارتفاع برج إيفل 330 مترا. ([ويكيبيديا](https://ar.wikipedia.org/wiki/x)) افتتح عام 1889."
    url = "https://ar.wikipedia.org/wiki/x"
    t = responses_record([search_call("ws_1", [url]), answer(text, [url_cite(text, "([ويكيبيديا](" + url + "))",
                                                                             url, "برج إيفل")])])
    scored = render(convert_transcript(t), pages((url, "برج إيفل هو برج حديدي في باريس يبلغ ارتفاعه 330 مترا.")))
    assert scored.evidence is not None
    (page,) = scored.evidence
    assert (page.call_id, page.tool, page.title, page.available) == ("ws_1", "web_search_call", "برج إيفل", True)
    assert [scored.response[a:b] for a, b in page.cited] == [
        "يبلغ ارتفاع برج إيفل 330 مترا. ([ويكيبيديا](https://ar.wikipedia.org/wiki/x))"]
    assert page.text in scored.prompt


def test_markdown_links_the_annotations_do_not_cover_are_citations_too() -> None:
    link = f"[Wikipedia]({WIKI})"
    text = f"First claim. {link}\n\nSecond claim. {link}"
    found = message_citations(answer(text, [url_cite(text, link, WIKI)]))
    assert [c.sentence for c in found] == [f"First claim. {link}", f"Second claim. {link}"]
    assert {c.url for c in found} == {WIKI}


def test_numeric_citation_titles_are_not_page_titles() -> None:
    text = "It is 330 m tall. ([1](u))"
    t = responses_record([search_call("ws_1", [WIKI]), answer(text, [url_cite(text, "([1](u))", WIKI, "3")])])
    (result,) = web_results(convert_transcript(t))
    assert result.refs[0].title is None
    assert "title" not in tool_response(render(convert_transcript(t), {}).prompt)["output"][0]


def evidence_of(scored: ScoringInput) -> tuple[Evidence, ...]:
    assert scored.evidence is not None
    return scored.evidence


def test_a_web_page_never_goes_to_an_x_search_but_a_post_may_go_to_a_web_search() -> None:
    post = "https://x.com/i/status/1991234567890123456"
    anns = [{"type": "url_citation", "url": WIKI}, {"type": "url_citation", "url": post}]
    only_x = xai_response("Tall. Popular.", anns, [xai_call("x_search_call", "x_keyword_search", {"query": "q"}, 0)])
    (t,) = read_transcripts([{"request": {"input": "q"}, "response": only_x}])
    conv = convert_transcript(t)
    searched, apart = web_results(conv)
    assert [r.url for r in searched.refs] == [post] and [r.url for r in apart.refs] == [WIKI] and apart.unlogged
    only_web = xai_response("Tall. Popular.", anns, [xai_call("web_search_call", "web_search", {"query": "q"}, 0)])
    (t,) = read_transcripts([{"request": {"input": "q"}, "response": only_web}])
    (result,) = web_results(convert_transcript(t))
    assert [r.url for r in result.refs] == [WIKI, post]


def test_bare_markers_number_annotations_that_carry_no_place() -> None:
    anns = [{"type": "url_citation", "url": WIKI}, {"type": "url_citation", "url": SITE}]
    text = "Die Höhe beträgt 330 m.[1] Eröffnet 1889.[2] Unbekannt.[7]"
    response = xai_response(text, anns, [xai_call("web_search_call", "web_search", {"query": "q"}, 0)])
    (t,) = read_transcripts([{"request": {"input": "Wie hoch?"}, "response": response}])
    conv = convert_transcript(t)
    (result,) = web_results(conv)
    assert [(r.number, r.url, r.cited) for r in result.refs] == [
        (1, WIKI, ("Die Höhe beträgt 330 m.[1]",)), (2, SITE, ("Eröffnet 1889.[2]",))]
    assert "the answer cites [7], but no logged source has that number" in conv.warnings


def test_a_long_chinese_page_keeps_the_cited_passage_within_the_budget() -> None:
    from tlmscore import Settings

    filler = "\n\n".join(f"第{i}段介绍了巴黎的咖啡馆和塞纳河的风景。" for i in range(3000))
    text = f"{filler}\n\n埃菲尔铁塔高330米，于1889年建成。\n\n{filler}"
    t = chat_record("埃菲尔铁塔高约330米。[1]", {"citations": [ZH]}, question="埃菲尔铁塔有多高？")
    scored = render(convert_transcript(t), pages((ZH, text)), Settings(page_chars=2000))
    (page,) = evidence_of(scored)
    assert "埃菲尔铁塔高330米，于1889年建成。" in page.text and len(page.text) <= 2000


def test_openrouter_annotation_content_is_the_logged_snippet() -> None:
    content = "Il mesure 330 m. [toureiffel.paris](https://www.toureiffel.paris/en)"
    start = content.index("[toureiffel")
    ann = {"type": "url_citation", "url_citation": {"url": SITE, "title": "La tour", "start_index": start,
                                                    "end_index": len(content),
                                                    "content": "La tour Eiffel mesure 330 mètres."}}
    response = {"id": "gen-1", "object": "chat.completion", "created": 1, "model": "openai/gpt-4o:online",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content, "annotations": [ann]}}]}
    (t,) = read_transcripts([{"request": {"messages": [{"role": "user", "content": "Hauteur ?"}]},
                              "response": response}])
    scored = render(convert_transcript(t), {})
    (page,) = evidence_of(scored)
    assert (page.available, page.origin, page.text, page.title) == (True, "log", "La tour Eiffel mesure 330 mètres.",
                                                                    "La tour")
    assert [scored.response[a:b] for a, b in page.cited] == [content]


_PIECES = st.sampled_from(["Tall.", "[1]", "[2][3]", "[[1]](https://a.example/x)", "[a](https://b.example/y)",
                           " ", "。", "U.S.", "\n", "(", "]", "高い"])


@given(st.lists(_PIECES, max_size=12).map("".join),
       st.lists(st.fixed_dictionaries({"type": st.sampled_from(["url_citation", "file_citation", "other"]),
                                       "url": st.sampled_from(["https://a.example/x", "https://c.example/z"]),
                                       "start_index": st.integers(-3, 90), "end_index": st.integers(-3, 90),
                                       "index": st.integers(-3, 90), "file_id": st.just("file-1")}), max_size=4))
def test_any_text_and_annotations_give_citations_inside_the_text(text: str, anns: list[dict[str, Any]]) -> None:
    cites = list(message_citations({"role": "assistant", "content": [{"text": text, "annotations": anns}]}))
    for cite in cites:
        assert cite.sentence in text
        if cite.span is not None:
            assert 0 <= cite.span[0] <= cite.span[1] <= len(text)
    for ann in anns:  # and a URL citation of some of the text is never lost
        start, end = ann["start_index"], ann["end_index"]
        if ann["type"] == "url_citation" and 0 <= start < end <= len(text) and text[start:end].strip():
            assert any(cite.url == ann["url"] and cite.kind == "url" for cite in cites)


def test_lenticular_markers_of_chinese_answers_number_the_sources() -> None:
    t = chat_record("埃菲尔铁塔高330米。【1】每年六百万游客。【2】【3】", {"citations": [ZH, SITE]})
    conv = convert_transcript(t)
    (result,) = web_results(conv)
    assert [(r.number, r.cited) for r in result.refs] == [(1, ("埃菲尔铁塔高330米。【1】",)),
                                                         (2, ("每年六百万游客。【2】【3】",))]
    assert "the answer cites [3], but no logged source has that number" in conv.warnings
