"""Provenance kept honest (fidelity #5), structured evidence (validity #1), tool search (fidelity #8)."""

from __future__ import annotations

import json
from typing import Any

from tests.convert.test_citations import (
    BRIT,
    SITE,
    WIKI,
    answer,
    evidence_of,
    pages,
    responses_record,
    search_call,
    tool_response,
    url_cite,
    web_results,
)
from tlmscore import Page, Settings
from tlmscore.convert import convert_items, convert_transcript
from tlmscore.model import ToolCall, ToolResult, WebResult
from tlmscore.rendering import render, render_prompt

TEXT = "The tower is 330 m tall. It opened in 1889."
USER = {"role": "user", "content": "How tall is the Eiffel Tower?"}


def cited_answer(*urls: str) -> dict[str, Any]:
    sentences = ["The tower is 330 m tall.", "It opened in 1889."]
    return answer(TEXT, [url_cite(TEXT, sentences[i % 2], url) for i, url in enumerate(urls)])


def test_a_cited_page_among_no_logged_result_is_shown_apart_with_a_warning() -> None:
    t = responses_record([search_call("ws_1", [WIKI, SITE]), cited_answer(WIKI, BRIT)])
    conv = convert_transcript(t)
    searched, apart = web_results(conv)
    assert [r.url for r in searched.refs] == [WIKI] and not searched.unlogged
    assert [r.url for r in apart.refs] == [BRIT] and apart.unlogged
    assert any("no logged search result holds" in w for w in conv.warnings)
    scored = render(conv, pages((WIKI, "It is 330 m tall."), (BRIT, "Opened in 1889.")))
    assert "System: <cited_sources>" in scored.prompt
    block = json.loads(scored.prompt.split("<cited_sources>\n")[1].split("\n</cited_sources>")[0])
    assert "not among the logged search results" in block["note"] and block["pages"][0]["url"] == BRIT
    wiki, brit = evidence_of(scored)
    assert (wiki.call_id, brit.call_id, brit.tool) == ("ws_1", None, None)
    assert [scored.response[a:b] for a, b in brit.cited] == ["It opened in 1889."]


def test_a_search_that_logged_no_sources_takes_the_citations_nobody_else_holds() -> None:
    t = responses_record([search_call("ws_1", [WIKI]), search_call("ws_2", None), cited_answer(WIKI, BRIT)])
    conv = convert_transcript(t)
    assert [[r.url for r in w.refs] for w in web_results(conv)] == [[WIKI], [BRIT]]
    assert not any("no logged search result" in w for w in conv.warnings)


def test_a_failed_search_is_shown_as_failed_without_include_advice() -> None:
    t = responses_record([search_call("ws_1", None, status="failed"), answer("I could not search.", [])])
    conv = convert_transcript(t)
    (result,) = web_results(conv)
    assert result.status == "failed" and result.refs == ()
    assert not any("include=" in w for w in conv.warnings)
    assert any("failed" in w for w in conv.warnings)
    scored = render(conv, {})
    assert tool_response(scored.prompt)["output"] == {"status": "failed",
                                                      "error": "This call failed and returned no results."}
    (failed,) = evidence_of(scored)
    assert (failed.kind, failed.available, failed.status, failed.call_id) == ("tool", False, "failed", "ws_1")


def test_a_failed_search_is_given_no_citation() -> None:
    t = responses_record([search_call("ws_1", None, status="failed"), cited_answer(WIKI)])
    conv = convert_transcript(t)
    failed, apart = web_results(conv)
    assert failed.refs == () and apart.unlogged and [r.url for r in apart.refs] == [WIKI]


def test_queries_stay_a_list() -> None:
    item = search_call("ws_1", [WIKI], queries=["eiffel height", "tour eiffel hauteur"])
    del item["action"]["query"]
    conv = convert_transcript(responses_record([item, answer("x", [])]))
    call = next(t for t in conv.turns if isinstance(t, ToolCall))
    assert call.arguments == {"queries": ["eiffel height", "tour eiffel hauteur"]}


def test_replayed_messages_without_type_do_not_change_an_earlier_searchs_sources() -> None:
    earlier = search_call("ws_0", [WIKI, SITE])
    history = [USER, earlier, {"role": "assistant", "content": "It is 330 m tall."},
               {"role": "user", "content": "And when did it open?"}]
    items = [*history, search_call("ws_1", [WIKI, BRIT]), cited_answer(WIKI, BRIT)]
    conv = convert_items(items, answer_start=len(items) - 1, settings=Settings())
    first, second = web_results(conv)
    assert [r.url for r in first.refs] == [WIKI, SITE]  # its own answer cited nothing: its sources, as logged
    assert [r.url for r in second.refs] == [WIKI, BRIT]


def file_search(results: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["leave policy"],
            "results": results}


def test_file_citations_are_kept_and_an_unknown_file_is_flagged() -> None:
    text = "Employees get 25 days of leave. Carry-over is capped at 5 days."
    anns = [{"type": "file_citation", "file_id": "file-A", "filename": "leave.pdf", "index": 32},
            {"type": "file_citation", "file_id": "file-Z", "filename": "other.pdf", "index": len(text)}]
    results = [{"file_id": "file-A", "filename": "leave.pdf", "score": 0.9, "text": "Leave: 25 days a year.",
                "attributes": {}}]
    conv = convert_items([USER, file_search(results), answer(text, anns)], answer_start=2,
                         tools=[{"type": "file_search"}])
    assert "the answer cites file 'other.pdf', which is among no logged file_search result" in conv.warnings
    scored = render(conv, {})
    (doc,) = evidence_of(scored)
    assert (doc.kind, doc.doc_id, doc.title, doc.text, doc.call_id) == (
        "file", "file-A", "leave.pdf", "Leave: 25 days a year.", "fs_1")
    assert [scored.response[a:b] for a, b in doc.cited] == ["Employees get 25 days of leave."]


def test_file_search_without_logged_results_is_unavailable_evidence() -> None:
    conv = convert_items([USER, file_search(None), answer("25 days.", [])], answer_start=2,
                         tools=[{"type": "file_search"}])
    (doc,) = evidence_of(render(conv, {}))
    assert (doc.kind, doc.available, doc.status) == ("file", False, "not_logged")


def test_chat_tool_results_are_evidence_too() -> None:
    from tlmscore.convert import convert_chat

    messages = [{"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "الطقس مشمس"}]
    conv = convert_chat(messages, answer={"role": "assistant", "content": "مشمس."})
    (out,) = evidence_of(render(conv, {}))
    assert (out.kind, out.tool, out.call_id, out.text) == ("tool", "weather", "c1", "الطقس مشمس")


def test_tool_outputs_are_evidence_as_shown() -> None:
    items = [USER, {"type": "function_call", "name": "lookup", "arguments": "{\"q\": \"東京\"}", "call_id": "c1"},
             {"type": "function_call_output", "call_id": "c1", "output": "東京タワーは333メートルです。"},
             answer("333 m.", [])]
    conv = convert_items(items, answer_start=3, tools=[{"type": "function", "name": "lookup"}])
    (out,) = evidence_of(render(conv, {}))
    assert (out.kind, out.tool, out.call_id, out.text) == ("tool", "lookup", "c1", "東京タワーは333メートルです。")


def test_render_is_deterministic_and_evidence_matches_the_prompt() -> None:
    t = responses_record([search_call("ws_1", [WIKI, SITE]), cited_answer(WIKI, SITE)])
    found = pages((WIKI, "Tower facts. " * 20000), (SITE, "Opening: 1889."))
    one, two = render(convert_transcript(t), found), render(convert_transcript(t), found)
    assert one == two
    for ev in evidence_of(one):
        assert ev.text and json.dumps(ev.text, ensure_ascii=False)[1:-1] in one.prompt and ev.origin == "live"
    assert len(evidence_of(one)[0].text) < 20000 * 13  # budgeted, as shown


DEFERRED: dict[str, Any] = {"type": "function", "name": "get_weather", "defer_loading": True, "description": "Weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def test_deferred_tools_appear_only_where_a_tool_search_loads_them() -> None:
    tools = [DEFERRED, {"type": "tool_search"}]
    loaded = {"type": "tool_search_output", "id": "tso_1", "call_id": None, "execution": "server",
              "status": "completed", "tools": [DEFERRED]}
    items: list[dict[str, Any]] = [USER, {
        "type": "tool_search_call", "id": "tsc_1", "call_id": None, "execution": "server",
                    "status": "completed", "arguments": {"paths": ["get_weather"]}}, loaded,
             {"type": "function_call", "name": "get_weather", "namespace": "get_weather",
              "arguments": "{\"city\": \"Porto\"}", "call_id": "c1"}]
    conv = convert_items(items, answer_start=3, tools=tools)
    assert [d["name"] for d in conv.tools] == ["tool_search"]
    assert conv.tools[0]["parameters"]["properties"] == {"paths": {"type": "array", "items": {"type": "string"}}}
    result = next(t for t in conv.turns if isinstance(t, ToolResult))
    assert [d["name"] for d in result.output["tools"]] == ["get_weather"]
    prompt = render_prompt(conv)
    assert prompt.index('"name": "get_weather"') > prompt.index("</tools>")
    never = convert_items([USER, answer("No tools needed.", [])], answer_start=1, tools=tools)
    assert [d["name"] for d in never.tools] == ["tool_search"]


def test_namespaces_keep_two_search_tools_apart() -> None:
    def namespace(name: str) -> dict[str, Any]:
        return {"type": "namespace", "name": name, "description": name,
                "tools": [{"type": "function", "name": "search", "parameters": {"type": "object"}}]}

    items: list[dict[str, Any]] = [USER, {
        "type": "function_call", "name": "search", "namespace": "crm", "arguments": "{}",
                    "call_id": "c1"}]
    conv = convert_items(items, answer_start=1, tools=[namespace("crm"), namespace("docs")])
    assert [d["name"] for d in conv.tools] == ["crm.search", "docs.search"]
    (call,) = conv.answer
    assert isinstance(call, ToolCall) and call.name == "crm.search"


def test_a_hosted_tool_search_with_a_schema_keeps_it() -> None:
    schema = {"type": "object", "properties": {"goal": {"type": "string"}}, "required": ["goal"]}
    items: list[dict[str, Any]] = [USER, {
        "type": "tool_search_call", "id": "tsc_1", "call_id": "c1", "execution": "client",
                    "status": "completed", "arguments": {"goal": "weather"}}]
    conv = convert_items(items, answer_start=1, tools=[{"type": "tool_search", "parameters": schema}])
    assert conv.tools[0]["parameters"] == schema


def test_unavailable_pages_are_not_evidence() -> None:
    t = responses_record([search_call("ws_1", [WIKI]), cited_answer(WIKI)])
    (page,) = evidence_of(render(convert_transcript(t), {WIKI: Page(url=WIKI, status="http_error", error="404")}))
    assert (page.available, page.status, page.text, page.origin) == (False, "http_error", "", None)
    assert isinstance(web_results(convert_transcript(t))[0], WebResult)


def test_a_namespace_repeating_a_listed_tool_declares_it_once() -> None:
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    tools = [weather, {"type": "namespace", "name": "get_weather", "description": "Weather.", "tools": [weather]}]
    conv = convert_items([USER, answer("Sunny.", [])], answer_start=1, tools=tools)
    assert [d["name"] for d in conv.tools] == ["get_weather"]


def test_deferred_tools_added_mid_conversation_wait_for_their_tool_search() -> None:
    added = {"type": "additional_tools", "role": "developer", "tools": [DEFERRED]}
    conv = convert_items([USER, added, answer("Later.", [])], answer_start=2)
    assert "get_weather" not in [d["name"] for d in conv.tools]


def test_links_in_a_user_message_after_a_search_are_not_citations() -> None:
    user_link = {"role": "user", "content": f"Compare with [this page]({BRIT})."}
    items = [USER, search_call("ws_1", [WIKI]), user_link, answer("Done.", [])]
    conv = convert_items(items, answer_start=3)
    assert [[r.url for r in w.refs] for w in web_results(conv)] == [[WIKI]]
    assert conv.warnings == ()
