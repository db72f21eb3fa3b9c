"""Other formats: Chat Completions, search-augmented chat (Perplexity), xAI, and OpenAI Batch API files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT
from tlmscore import MemoryPages, Page, Settings, prepare, read_transcripts
from tlmscore.convert import SEARCH_NOT_LOGGED, UNCITED, convert_transcript
from tlmscore.model import ToolCall, WebResult
from tlmscore.rendering import render_prompt, render_response

FIXTURES = ROOT / "fixtures"
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


def test_recorded_perplexity_answers_cite_their_pages(recorded_responses: Path) -> None:
    paths = sorted(recorded_responses.glob("perplexity-*.json"))
    assert len(paths) >= 2
    for path in paths:
        (t,) = read_transcripts(path)
        conv = convert_transcript(t)
        _, result = search_pair(conv)
        citations = json.loads(path.read_text(encoding="utf-8"))["citations"]  # URLs, or {url, title} objects
        urls = {c["url"] if isinstance(c, dict) else c for c in citations}
        assert result.refs and {r.url for r in result.refs} <= urls, path.name
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


# ----------------------------------------------- xAI and page actions, byte for byte, as providers log them

POST = "https://x.com/i/status/1991234567890123456"
ARCH = "https://www.nps.gov/jeff/planyourvisit/gateway-arch-facts.htm"
SCHEMA_END = "may optionally include a call_id, which should be ignored.\n\n"


def responses_log(output: list[dict[str, Any]], text: str, urls: list[str], tools: list[str]) -> dict[str, Any]:
    """A Responses record: the logged calls, then an answer citing `urls` (xAI logs no indices)."""
    answer = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
              "content": [{"type": "output_text", "text": text,
                           "annotations": [{"type": "url_citation", "url": url} for url in urls]}]}
    return {"id": "log", "request": {"model": "grok-4", "input": "What is said?",
                                     "tools": [{"type": tool} for tool in tools]},
            "response": {"id": "resp_1", "object": "response", "model": "grok-4", "output": [*output, answer]}}


def converted(log: dict[str, Any], **settings: Any) -> Any:
    (t,) = read_transcripts([log])
    return convert_transcript(t, Settings(**settings)) if settings else convert_transcript(t)


def tool_lines(prompt: str) -> list[dict[str, Any]]:
    """The tools the prompt declares, one JSON object a line between `<tools>` and `</tools>`."""
    block = prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    return [json.loads(line) for line in block.splitlines()]


def after_tools(prompt: str) -> str:
    return prompt.split(SCHEMA_END, 1)[1]


def call_block(name: str, arguments: dict[str, Any], call_id: str) -> str:
    body = json.dumps({"name": name, "arguments": arguments, "call_id": call_id}, indent=2, ensure_ascii=False)
    return f"Assistant: <tool_call>\n{body}\n</tool_call>\n\n"


def response_block(name: str, call_id: str, output: Any) -> str:
    body = json.dumps({"name": name, "call_id": call_id, "output": output}, indent=2, ensure_ascii=False)
    return f"Tool: <tool_response>\n{body}\n</tool_response>\n\n"


X_TOOL = {"type": "function", "name": "x_search", "description": "Search posts on X (xAI's x_search tool).",
          "parameters": {"type": "object"}}
FAILED = {"status": "failed", "error": "This call failed and returned no results."}


def test_an_x_search_logged_without_a_name_or_an_id_takes_the_tool_name_and_its_call_id() -> None:
    log = responses_log([{"type": "x_search_call", "call_id": "call_x1", "arguments": '{"query": "pi 6"}',
                          "status": "completed"}], "They like it.", [POST], ["x_search"])
    conv = converted(log)
    prompt = render_prompt(conv, {POST: Page(url=POST, status="ok", title="Post", text="Love the new Pi.")})
    assert tool_lines(prompt) == [X_TOOL]
    assert [turn.server for turn in conv.turns if isinstance(turn, ToolCall)] == [True]  # a built-in tool's call
    assert after_tools(prompt) == (
        "User: What is said?\n\n" + call_block("x_search", {"query": "pi 6"}, "call_x1")
        + response_block("x_search", "call_x1", [{"url": POST, "title": "Post", "content": "Love the new Pi."}])
        + "Assistant:")
    assert conv.warnings == ()


def test_a_failed_x_search_without_ids_is_shown_failed_under_an_empty_call_id() -> None:
    log = responses_log([{"type": "x_search_call", "name": "x_semantic_search", "arguments": '{"query": "pi"}',
                          "status": "failed"}], "I could not search X.", [], ["x_search"])
    prompt = render_prompt(converted(log))
    assert after_tools(prompt) == ("User: What is said?\n\n" + call_block("x_semantic_search", {"query": "pi"}, "")
                                   + response_block("x_semantic_search", "", FAILED) + "Assistant:")


def test_each_x_search_function_is_declared_once_in_the_order_first_called() -> None:
    calls = [{"type": "x_search_call", "id": f"fc_{n}", "name": name, "arguments": '{"query": "pi"}',
              "status": "completed"} for n, name in enumerate(["x_keyword_search", "x_semantic_search",
                                                                "x_keyword_search"])]
    prompt = render_prompt(converted(responses_log(calls, "They like it.", [POST], ["x_search"])))
    assert [tool["name"] for tool in tool_lines(prompt)] == ["x_keyword_search", "x_semantic_search"]


def test_a_failed_page_open_is_shown_failed_with_a_warning() -> None:
    opened = {"type": "web_search_call", "id": "ws_2", "status": "failed", "action": {"type": "open_page", "url": ARCH}}
    conv = converted(responses_log([opened], "The page did not open.", [], ["web_search"]))
    prompt = render_prompt(conv, {ARCH: Page(url=ARCH, status="ok", text="The Arch is 192 m tall.")})
    assert after_tools(prompt) == ("User: What is said?\n\n" + call_block("open_page", {"url": ARCH}, "ws_2")
                                   + response_block("open_page", "ws_2", FAILED) + "Assistant:")
    assert conv.warnings == ("web_search_call open_page 'ws_2' failed: the page was not read",)
    assert conv.urls == ()
    assert [turn.server for turn in conv.turns if isinstance(turn, ToolCall)] == [True]  # a built-in tool's call


def test_a_page_open_logged_without_a_url_or_an_id_says_so() -> None:
    """OpenAI's `open_page` action may log `url: null`; the call is shown with an empty URL and no page."""
    opened = {"type": "web_search_call", "status": "completed", "action": {"type": "open_page", "url": None}}
    conv = converted(responses_log([opened], "Nothing opened.", [], ["web_search"]))
    assert after_tools(render_prompt(conv)) == ("User: What is said?\n\n" + call_block("open_page", {"url": ""}, "")
                                                + response_block("open_page", "", []) + "Assistant:")
    assert conv.warnings == ("web_search_call open_page has no URL",)


def test_the_sentence_citing_an_opened_page_chooses_the_passage_shown() -> None:
    text = "\n\n".join([*(f"Paragraph {n} is about the visitor centre and its opening hours." for n in range(40)),
                        "The tram to the top of the Arch takes four minutes and carries five people per car, "
                        "in eight cars.", *(f"Closing paragraph {n} is about parking." for n in range(40))])
    answer = "The tram to the top takes four minutes."
    opened = {"type": "web_search_call", "id": "ws_4", "status": "completed", "action": {"type": "open_page",
                                                                                     "url": ARCH}}
    log = responses_log([opened], answer, [ARCH], ["web_search"])
    log["response"]["output"][-1]["content"][0]["annotations"][0] |= {"start_index": 0, "end_index": len(answer)}
    prompt = render_prompt(converted(log), {ARCH: Page(url=ARCH, status="ok", text=text)}, Settings(page_chars=200))
    assert "carries five people per car" in prompt


def test_a_search_with_unlogged_results_and_one_the_answer_does_not_cite_say_so() -> None:
    unlogged = {"type": "web_search_call", "id": "ws_5", "status": "completed",
                "action": {"type": "search", "query": "arch"}}
    uncited = {"type": "web_search_call", "id": "ws_6", "status": "completed",
               "action": {"type": "search", "query": "arch height", "sources": [{"type": "url", "url": POST}]}}
    opened = {"type": "web_search_call", "id": "ws_7", "status": "completed",
              "action": {"type": "open_page", "url": ARCH}}
    first = render_prompt(converted(responses_log([unlogged], "I found nothing I can cite.", [], ["web_search"])))
    assert after_tools(first) == (
        "User: What is said?\n\n" + call_block("web_search_call", {"query": "arch"}, "ws_5")
        + response_block("web_search_call", "ws_5", SEARCH_NOT_LOGGED) + "Assistant:")
    second = render_prompt(converted(responses_log([uncited, opened], "It is tall.", [ARCH], ["web_search"])),
                           {ARCH: Page(url=ARCH, status="ok", text="Tall.")})
    assert response_block("web_search_call", "ws_6", UNCITED.format(n=1)) in second


def test_a_find_in_page_pattern_chooses_the_passage_shown() -> None:
    text = "\n\n".join([*(f"Paragraph {n} is about the visitor centre and its opening hours." for n in range(40)),
                        "The Arch is 192 m tall, as tall as it is wide, and it was finished in 1965 after "
                        "two and a half years of building.",
                        *(f"Closing paragraph {n} is about parking and tickets." for n in range(40))])
    found = {"type": "web_search_call", "id": "ws_3", "status": "completed",
             "action": {"type": "find_in_page", "url": ARCH, "pattern": "192 m"}}
    conv = converted(responses_log([found], "It is tall.", [], ["web_search"]))
    settings = Settings(page_chars=200)
    prompt = render_prompt(conv, {ARCH: Page(url=ARCH, status="ok", title="Facts", text=text)}, settings)
    (call, result) = after_tools(prompt).split("\n\n", 2)[1:3]
    assert call + "\n\n" == call_block("find_in_page", {"url": ARCH, "pattern": "192 m"}, "ws_3")
    shown = json.loads(result.removeprefix("Tool: <tool_response>\n").split("\n</tool_response>")[0])
    assert shown["name"] == "find_in_page" and shown["call_id"] == "ws_3"
    (entry,) = shown["output"]
    assert (entry["url"], entry["title"]) == (ARCH, "Facts")
    assert "The Arch is 192 m tall" in entry["content"] and len(entry["content"]) < len(text) // 4
    opened = converted(responses_log([{**found, "action": {"type": "open_page", "url": ARCH}}], "It is tall.", [],
                                     ["web_search"]))
    without = render_prompt(opened, {ARCH: Page(url=ARCH, status="ok", title="Facts", text=text)}, settings)
    assert "192 m tall" not in without  # the pattern, not the page's order, chose the passage


def test_xai_browse_page_with_instructions_opens_its_page_and_reads_for_them() -> None:
    browse = {"type": "web_search_call", "id": "fc_1", "name": "browse_page", "call_id": "", "status": "completed",
              "arguments": json.dumps({"url": ARCH, "instructions": "How tall is it?"})}
    conv = converted(responses_log([browse], "It is 192 m tall.", [ARCH], ["web_search"]))
    prompt = render_prompt(conv, {ARCH: Page(url=ARCH, status="ok", title="Facts", text="The Arch is 192 m tall.")})
    assert after_tools(prompt) == (
        "User: What is said?\n\n" + call_block("open_page", {"url": ARCH, "instructions": "How tall is it?"}, "fc_1")
        + response_block("open_page", "fc_1", [{"url": ARCH, "title": "Facts", "content": "The Arch is 192 m tall."}])
        + "Assistant:")
    assert conv.urls == (ARCH,) and conv.warnings == ()


@pytest.mark.parametrize(("arguments", "called"), [
    ('{"query": "arch", "num_results": 5}', {"query": "arch"}),  # the search as a model would call it
    ("arch height", {"query": "arch height"}),  # not JSON: the text is the query
    ('["arch", "height"]', {"query": "['arch', 'height']"}),  # JSON, but not an object
    ('{"queries": ["arch", "arch height"]}', {"queries": ["arch", "arch height"]}),
    ('{"query": "arch", "queries": ["arch height"]}', {"query": "arch", "queries": ["arch height"]}),
    ('{"query": "arch", "queries": "arch height"}', {"query": "arch"}),  # `queries` that are not a list
    ("", {"query": None}),
])
def test_search_arguments_are_shown_as_the_provider_logged_them(arguments: str, called: dict[str, Any]) -> None:
    search = {"type": "web_search_call", "id": "fc_0", "name": "web_search", "status": "completed",
              "arguments": arguments}
    prompt = render_prompt(converted(responses_log([search], "It is tall.", [ARCH], ["web_search"])))
    assert call_block("web_search_call", called, "fc_0") in prompt


def test_logged_snippets_and_dates_stand_beside_a_page_that_could_not_be_fetched() -> None:
    log = {"id": "pplx", "request": {"model": "sonar", "messages": [{"role": "user", "content": "How tall?"}]},
           "response": {"id": "c1", "object": "chat.completion", "model": "sonar", "choices": [
               {"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "It is 192 m tall [1]."}}],
               "search_results": [{"title": "Arch facts", "url": ARCH, "date": "2024-05-01",
                                   "snippet": "The Arch stands 630 feet."},
                                  {"title": "Arch", "url": POST, "date": 20240501, "snippet": "  "}]}}
    conv = converted(log)
    prompt = render_prompt(conv, {ARCH: Page(url=ARCH, status="http_error", http_status=403,
                                             error="HTTP 403 Forbidden")})
    block = prompt.split("<tool_response>\n", 1)[1].split("\n</tool_response>", 1)[0]
    unknown = "Its content is unknown; nothing here confirms or refutes what the answer says about it."
    assert json.loads(block)["output"] == [{
        "citation": "[1]", "url": ARCH, "title": "Arch facts", "date": "2024-05-01",
        "snippet": "The Arch stands 630 feet.",
        "content": f"This page could not be retrieved (http_error: HTTP 403 Forbidden). {unknown}"}]
    listed = render_prompt(converted(log, urls="all"))  # a blank snippet and a date that is no text are left out
    assert {"citation": "[2]", "url": POST, "title": "Arch",
            "content": f"This page could not be retrieved (offline_miss: no page was available). {unknown}"} in \
        json.loads(listed.split("<tool_response>\n", 1)[1].split("\n</tool_response>", 1)[0])["output"]


def test_only_url_sources_are_pages_and_the_urls_policy_chooses_them() -> None:
    """OpenAI lists `{"type": "api", "name": ...}` sources beside pages; a source without a type is a page, and
    a title that is only its number is no title."""
    search = {"type": "web_search_call", "id": "ws_8", "status": "completed", "action": {
        "type": "search", "query": "arch", "sources": [
            {"type": "api", "name": "oai-weather"}, {"type": "url", "url": ARCH, "title": "Facts"},
            {"url": POST, "number": 2, "title": "[2]"}, {"type": "url"}, "https://not-a-source.example/"]}}
    pages = {ARCH: Page(url=ARCH, status="ok", text="Tall."), POST: Page(url=POST, status="ok", text="A post.")}
    shown = render_prompt(converted(responses_log([search], "It is tall.", [], ["web_search"]), urls="sources"),
                          pages)
    assert response_block("web_search_call", "ws_8", [
        {"citation": "[2]", "url": POST, "content": "A post."},
        {"url": ARCH, "title": "Facts", "content": "Tall."}]) in shown


def test_searches_that_show_nothing_warn_why() -> None:
    no_sources = {"type": "web_search_call", "id": "ws_9", "status": "completed",
                  "action": {"type": "search", "query": "arch"}}
    empty = {**no_sources, "action": {"type": "search", "query": "arch", "sources": []}}
    strange = {**no_sources, "action": {"type": "lookup", "query": "arch", "sources": []}}
    assert converted(responses_log([no_sources], "No idea.", [], ["web_search"])).warnings == (
        "web_search_call has no sources: add include=['web_search_call.action.sources'] to the request",)
    assert converted(responses_log([empty], "No idea.", [], ["web_search"])).warnings == (
        "web_search_call has no results in the log and the answer cites no page",)
    assert converted(responses_log([strange], "No idea.", [], ["web_search"])).warnings == (
        "web_search_call action 'lookup' is unknown; rendered as a search",
        "web_search_call has no results in the log and the answer cites no page")
    failed = converted(responses_log([{**no_sources, "status": "failed"}], "No idea.", [], ["web_search"]))
    assert failed.warnings == ("web_search_call 'ws_9' failed: it returned no results",)
    assert after_tools(render_prompt(failed)) == (
        "User: What is said?\n\n" + call_block("web_search_call", {"query": "arch"}, "ws_9")
        + response_block("web_search_call", "ws_9", FAILED) + "Assistant:")


def test_an_x_search_the_answer_cites_nothing_of_found_what_is_unknown() -> None:
    """xAI logs no results for an X search: only the posts the answer cites are known of them."""
    log = responses_log([{"type": "x_search_call", "id": "fc_9", "name": "x_keyword_search",
                          "arguments": '{"query": "pi"}', "status": "completed"}], "Nobody says much.", [],
                        ["x_search"])
    assert after_tools(render_prompt(converted(log))) == (
        "User: What is said?\n\n" + call_block("x_keyword_search", {"query": "pi"}, "fc_9")
        + response_block("x_keyword_search", "fc_9", SEARCH_NOT_LOGGED) + "Assistant:")


def test_a_provider_search_without_an_id_that_finds_nothing_cited_gives_no_include_advice() -> None:
    """`include` is OpenAI's option: a search logged with `arguments` (xAI) is only said to show nothing."""
    search = {"type": "web_search_call", "name": "web_search", "status": "completed", "arguments": '{"query": "arch"}'}
    conv = converted(responses_log([search], "No idea.", [], ["web_search"]))
    assert conv.warnings == ("web_search_call has no results in the log and the answer cites no page",)
    assert after_tools(render_prompt(conv)) == (
        "User: What is said?\n\n" + call_block("web_search_call", {"query": "arch"}, "")
        + response_block("web_search_call", "", SEARCH_NOT_LOGGED) + "Assistant:")
