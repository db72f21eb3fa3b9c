"""Convert + render: web evidence, content parts, budgets and deviations from the reference."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tlmscore import MemoryPages, Page, PageSource, Settings, read_transcripts
from tlmscore._urls import url_key
from tlmscore.convert import UNCITED, cited_sentence, convert_chat, convert_items, convert_transcript
from tlmscore.evidence.layers import load_page_records
from tlmscore.evidence.page import keyed_pages, page_for
from tlmscore.evidence.plan import Plan
from tlmscore.model import Conversation, Message, ToolCall, ToolResult, WebRef, WebResult
from tlmscore.rendering import render, render_prompt, render_response
from tlmscore.rendering._prompt import _json_block, _text_block

WIKI = "https://en.wikipedia.org/wiki/Eiffel_Tower"
BRIT = "https://www.britannica.com/topic/Eiffel-Tower"
SITE = "https://www.toureiffel.paris/en"
ANSWER = "The tower is 330 m tall. It opened in 1889 for the World's Fair."


def cite(url: str, start: int, end: int, title: str = "T") -> dict[str, Any]:
    return {"type": "url_citation", "url": url + "?utm_source=openai", "title": title,
            "start_index": start, "end_index": end}


def message(text: str, annotations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": annotations}]}


def search(call_id: str, sources: list[str] | None, query: str = "eiffel tower height") -> dict[str, Any]:
    action: dict[str, Any] = {"type": "search", "query": query}
    action["sources"] = None if sources is None else [{"type": "url", "url": u} for u in sources]
    return {"type": "web_search_call", "id": call_id, "status": "completed", "action": action}


def web_refs(items: list[dict[str, Any]], urls: str = "cited") -> list[list[str]]:
    conv = convert_items(items, answer_start=len(items) - 1, settings=Settings(urls=urls))  # type: ignore[arg-type]
    return [[r.url for r in t.refs] for t in conv.turns if isinstance(t, WebResult)]


USER = {"role": "user", "content": "How tall is the Eiffel Tower?"}
CITED = message(ANSWER, [cite(BRIT, 0, 24), cite(WIKI, 25, 64), cite(BRIT, 0, 24)])


def test_cited_policy_takes_citations_of_the_following_message_in_order() -> None:
    items = [USER, search("ws_1", [WIKI, SITE, BRIT]), {"type": "reasoning", "id": "rs"}, CITED]
    assert web_refs(items) == [[BRIT + "?utm_source=openai", WIKI + "?utm_source=openai"]]


def test_cited_policy_falls_back_to_sources_when_nothing_is_cited() -> None:
    items = [USER, search("ws_1", [WIKI, SITE]), message("No citations here.", [])]
    assert web_refs(items) == [[WIKI, SITE]]


def test_sources_and_all_policies() -> None:
    items = [USER, search("ws_1", [WIKI, SITE]), CITED]
    assert web_refs(items, "sources") == [[WIKI, SITE]]
    # BRIT is cited but among no logged result: shown apart, not as this search's result
    assert web_refs(items, "all") == [[WIKI + "?utm_source=openai", SITE], [BRIT + "?utm_source=openai"]]


def test_citations_are_shared_among_consecutive_searches_by_their_sources() -> None:
    items = [USER, search("ws_1", [WIKI]), search("ws_2", [SITE]), search("ws_3", None), CITED]
    assert web_refs(items) == [[WIKI + "?utm_source=openai"], [BRIT + "?utm_source=openai"]]
    # the answer cites pages, so ws_2's uncited source is not shown: its response says so
    conv = convert_items(items, answer_start=len(items) - 1)
    [uncited] = [t for t in conv.turns if isinstance(t, ToolResult) and t.call_id == "ws_2"]
    assert uncited.output == UNCITED.format(n=1)


def test_open_page_and_find_in_page_use_their_own_url_and_are_declared() -> None:
    items = [USER, {"type": "web_search_call", "id": "ws_1", "status": "completed",
                    "action": {"type": "open_page", "url": WIKI}},
             {"type": "web_search_call", "id": "ws_2", "status": "completed",
              "action": {"type": "find_in_page", "url": WIKI, "pattern": "330"}}, CITED]
    conv = convert_items(items, answer_start=3, tools=[{"type": "web_search"}])
    # BRIT is cited but no call read it: shown apart, as cited by the answer only
    assert [[r.url for r in t.refs] for t in conv.turns if isinstance(t, WebResult)] == \
        [[WIKI], [WIKI], [BRIT + "?utm_source=openai"]]
    assert [d["name"] for d in conv.tools] == ["web_search_call", "open_page", "find_in_page"]
    prompt = render_prompt(conv, {WIKI: Page(url=WIKI, status="ok", text="It is 330 m tall.")})
    assert '"name": "find_in_page",\n  "arguments": {\n    "url": "' + WIKI + '",\n    "pattern": "330"' in prompt


def test_pages_render_in_stable_order_with_unicode_and_failures_stated() -> None:
    items = [USER, search("ws_1", [WIKI, BRIT]), CITED]
    pages = MemoryPages([Page(url=WIKI, status="ok", title="Eiffel Tower", text="Tour Eiffel — 330 m, “Dame de fer”."),
                         Page(url=BRIT, status="timeout", error="timed out after 20 s")])
    prompt = render_prompt(convert_items(items, answer_start=2), {u: pages.get(u) for u in (WIKI, BRIT)})
    assert "Tour Eiffel — 330 m, “Dame de fer”." in prompt
    assert prompt.index(BRIT) < prompt.index(WIKI)
    assert "This page could not be retrieved (timeout: timed out after 20 s)" in prompt
    assert "Assume" not in prompt and "true" not in prompt.split("<tool_response>")[1]


def test_a_page_that_was_never_fetched_is_unavailable_not_invented() -> None:
    prompt = render_prompt(convert_items([USER, search("ws_1", [WIKI]), message("x", [])], answer_start=2), {})
    entry = json.loads(prompt.split("<tool_response>\n")[1].split("\n</tool_response>")[0])
    assert entry["output"] == [{"url": WIKI, "content": "This page could not be retrieved (offline_miss: no page "
                                "was available). Its content is unknown; nothing here confirms or refutes what "
                                "the answer says about it."}]


def test_long_pages_keep_the_cited_passage_within_the_budget() -> None:
    filler = "\n\n".join(f"Paragraph {i} talks about Paris cafés and the river Seine at length." for i in range(400))
    text = filler + "\n\nThe tower is 330 m tall since the antenna was added.\n\n" + filler
    items = [USER, search("ws_1", [WIKI]), message(ANSWER, [cite(WIKI, 0, 24)])]
    settings = Settings(page_chars=2000)
    prompt = render_prompt(convert_items(items, answer_start=2), {WIKI: Page(url=WIKI, status="ok", text=text)},
                           settings)
    content = json.loads(prompt.split("<tool_response>\n")[1].split("\n</tool_response>")[0])["output"][0]["content"]
    assert len(content) <= 2000
    assert "The tower is 330 m tall since the antenna was added." in content
    assert "[…]" in content


def test_total_evidence_budget_is_shared_between_pages() -> None:
    long_text = "word " * 5000
    items = [USER, search("ws_1", [WIKI, BRIT, SITE]), message("x", [])]
    pages = {u: Page(url=u, status="ok", text=long_text) for u in (WIKI, BRIT, SITE)}
    prompt = render_prompt(convert_items(items, answer_start=2), pages, Settings(evidence_chars=3000))
    output = json.loads(prompt.split("<tool_response>\n")[1].split("\n</tool_response>")[0])["output"]
    assert sum(len(o["content"]) for o in output) <= 3000
    assert all(len(o["content"]) > 900 for o in output)


def test_images_and_files_become_placeholders_without_base64() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100).decode()
    pdf = base64.b64encode(b"%PDF-1.4 tiny").decode()
    items = [{"role": "user", "content": [
        {"type": "input_text", "text": "What is in these?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{png}", "detail": "auto"},
        {"type": "input_image", "image_url": "https://example.org/cat.jpg"},
        {"type": "input_file", "filename": "invoice.pdf", "file_data": f"data:application/pdf;base64,{pdf}"},
        {"type": "input_file", "file_id": "file-abc"}]}, {"role": "assistant", "content": "ok"}]
    prompt = render_prompt(convert_items(items, answer_start=1))
    digest = hashlib.sha256(base64.b64decode(png)).hexdigest()[:12]
    assert prompt.startswith("What is in these?\n[image: image/png, 108 bytes, sha256:" + digest + "]")
    assert "[image: https://example.org/cat.jpg]" in prompt
    assert "[file: invoice.pdf, application/pdf, 13 bytes, sha256:" in prompt
    assert "[file: file-abc]" in prompt
    assert png[:20] not in prompt and pdf[:10] not in prompt


def test_refusal_and_answer_runs() -> None:
    refusal = {"type": "message", "id": "m", "role": "assistant", "status": "completed",
               "content": [{"type": "refusal", "refusal": "I can't help with that."}]}
    conv = convert_items([USER, refusal], answer_start=1)
    assert render_response(conv) == "I can't help with that."
    calls = [{"type": "function_call", "name": "a", "arguments": "{}", "call_id": "1"},
             {"type": "function_call", "name": "b", "arguments": "not json", "call_id": "2"}]
    conv = convert_items([USER, *calls], answer_start=1)
    response = render_response(conv)
    assert '"name": "a"' in response and '"arguments": "not json"' in response
    assert any("not valid JSON" in w for w in conv.warnings)


def test_unknown_item_types_render_generically_with_a_warning() -> None:
    item = {"type": "hologram_call", "id": "h1", "status": "completed", "prompt": "a cube", "result": "ok"}
    conv = convert_items([USER, item, message("done", [])], answer_start=2)
    prompt = render_prompt(conv)
    assert '"name": "hologram_call"' in prompt and '"prompt": "a cube"' in prompt and '"result": "ok"' in prompt
    assert conv.warnings == ("unhandled item type 'hologram_call': rendered as a generic tool call",)


def test_demo_fixture_prompt_bytes_are_the_same_in_every_process(demo_path: Path) -> None:
    script = (
        "import hashlib, sys\n"
        "from tlmscore import prepare, MemoryPages, Settings\n"
        "from tlmscore.evidence.layers import load_page_records\n"
        "from pathlib import Path\n"
        "pages = MemoryPages(load_page_records(Path(sys.argv[2])))\n"
        "df = prepare(sys.argv[1], Settings(offline=True, urls='all', cache_dir=sys.argv[3]), pages=pages)\n"
        "h = hashlib.sha256()\n"
        "for p, r in zip(df.prompt, df.response): h.update(repr((p, r)).encode())\n"
        "print(h.hexdigest())\n"
    )
    digests = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", script, str(demo_path), str(demo_path.parent / "pages"),
                              "/nonexistent-cache-unused"], env=env, capture_output=True, text=True,
                             check=True, timeout=120)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


@pytest.mark.parametrize("record_id", ["web-search-jwst-sources", "web-search-browse-asyncio"])
def test_demo_web_records_render_their_pages(demo_path: Path, record_id: str) -> None:
    """Each page the record refers to is in the prompt's web results: a fetched page with its text,
    a failed one as not retrieved, with why."""
    (t,) = [t for t in read_transcripts(demo_path) if t.id == record_id]
    conv = convert_transcript(t)
    known = asyncio.run(keyed_pages(MemoryPages(load_page_records(demo_path.parent / "pages")), Plan.of([conv.urls])))
    shown: dict[str, str] = {}
    for block in re.findall(r"<tool_response>\n(.*?)\n</tool_response>", render_prompt(conv, known, Settings()),
                            re.DOTALL):
        output = json.loads(block)["output"]
        shown.update({entry["url"]: entry["content"] for entry in output if isinstance(output, list)})
    assert set(conv.urls) == set(shown) and len(set(conv.urls)) >= 2
    assert any(page.ok for page in known.values()) and not all(page.ok for page in known.values())
    for url in conv.urls:
        page = known[url_key(url)]
        if page.ok:
            assert shown[url] == page.text
        else:
            assert shown[url].startswith(f"This page could not be retrieved ({page.status}")


def test_render_looks_pages_up_by_url_key_only() -> None:
    """Pages are keyed by `url_key`: a mapping keyed by another spelling holds no page for the URL."""
    tracked = WIKI + "?utm_source=openai"
    page = Page(url=tracked, status="ok", text="The tower is 330 m tall.")
    assert page_for({url_key(tracked): page}, WIKI) is page
    assert page_for({url_key(tracked): page}, tracked + "#top") is page
    missed = page_for({tracked: page}, tracked)
    assert missed.status == "offline_miss" and missed.text is None
    (t,) = read_transcripts([{"request": {"input": "How tall?", "tools": [{"type": "web_search"}]},
                              "response": {"output": [search("ws", [tracked]), message(ANSWER, [])]}}])
    conv = convert_transcript(t)
    assert "330 m tall" in render_prompt(conv, {url_key(tracked): page})
    assert "could not be retrieved (offline_miss" in render_prompt(conv, {tracked: page})


def test_a_page_fetched_under_one_spelling_serves_every_spelling_in_the_chunk(tmp_path: Path) -> None:
    from tlmscore import prepare

    def record(i: int, url: str) -> dict[str, Any]:
        return {"id": f"r{i}", "request": {"input": "How tall?", "tools": [{"type": "web_search"}]},
                "response": {"output": [search("ws", [url]), message(ANSWER, [])]}}

    asked: list[list[str]] = []

    class ExactPages(PageSource):
        async def pages(self, urls: list[str], as_of: object = None) -> dict[str, Page]:
            asked.append(list(urls))
            return {u: Page(url=u, status="ok", text="The tower is 330 m tall.") for u in urls}

    tracked = WIKI + "?utm_source=openai"
    df = prepare([record(1, tracked), record(2, WIKI)], Settings(offline=True, cache_dir=tmp_path),
                 pages=ExactPages())
    assert asked == [[tracked]]  # one page, asked for once, by the spelling cited first
    assert list(df.n_urls_ok) == [1, 1] and list(df.n_urls_failed) == [0, 0]
    assert "could not be retrieved" not in df.prompt[1]
    assert "The tower is 330 m tall." in df.prompt[1]


def _sentence_by_scanning(text: str, start: int, end: int) -> str:
    """`cited_sentence` spelled out with linear scans: the definition the fast version must match."""
    if not 0 <= start <= end <= len(text):
        return ""
    def initial(i: int) -> bool:  # a period after a dotted letter (`U.S.`, `e.g.`) ends no sentence
        return text[i] == "." and i >= 2 and text[i - 1].isalpha() and text[i - 2] == "."

    ends = [i + 1 for i, c in enumerate(text) if c == "\n" or (c in ".!?" and not initial(i) and (
        i + 1 == len(text) or text[i + 1].isspace()))]
    anchor = start
    while anchor > 0 and text[anchor - 1] in " \t":
        anchor -= 1
    if anchor > 0 and anchor in ends and (start == end or text.startswith(("(", "["), start)):
        return text[max((b for b in ends if b < anchor), default=0):end].strip()
    left = max((b for b in ends if b <= start), default=0)
    right = min((b for b in ends if b >= end), default=len(text))
    return text[left:right].strip()


def test_cited_sentence_examples() -> None:
    text = "The tower is 330 m tall. It opened in 1889 (v2.0 at example.com). ([site](u))\nNext line"
    period = text.index("tall.") + 5
    assert cited_sentence(text, text.index("330"), text.index("330") + 3) == "The tower is 330 m tall."
    assert cited_sentence(text, text.index("1889"), text.index("1889") + 4) == \
        "It opened in 1889 (v2.0 at example.com)."
    link = text.index("([site]")
    after = "It opened in 1889 (v2.0 at example.com). ([site](u))"
    assert cited_sentence(text, link, link + len("([site](u))")) == after
    # text right after a period is the next sentence; only a link or marker there closes the one before
    assert cited_sentence(text, period + 1, period + 3) == "It opened in 1889 (v2.0 at example.com)."
    assert cited_sentence(text, len(text) - 4, len(text)) == "Next line"
    assert cited_sentence(text, 5, 200) == ""


@given(st.text(st.sampled_from("ab .!?\n\t(["), max_size=40), st.integers(-2, 42), st.integers(0, 20))
def test_cited_sentence_matches_its_definition(text: str, start: int, length: int) -> None:
    assert cited_sentence(text, start, start + length) == _sentence_by_scanning(text, start, start + length)


_strings = st.text(st.characters(blacklist_categories=("Cs",)))
_text_values = st.recursive(_strings, lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(_strings, inner, max_size=3), max_leaves=8)


@given(st.dictionaries(_strings, _text_values, max_size=4))
def test_web_blocks_are_written_byte_for_byte_like_the_standard_library(value: dict[str, Any]) -> None:
    assert _text_block("tool_response", value) == _json_block("tool_response", value, unicode=True)


def test_a_lone_surrogate_in_a_page_still_renders() -> None:
    value = {"output": [{"url": "u", "content": "bad \udc80 byte, \u2028 line, \x1f unit"}]}
    assert _text_block("tool_response", value) == _json_block("tool_response", value, unicode=True)


# ------------------------------------------------- who spoke last: role prefixes between tool turns, byte for byte


def block(tag: str, value: dict[str, Any], *, ascii_only: bool = False) -> str:
    """A JSON block as the TLM format writes it: the tag, the value with two-space indents, the closing tag."""
    return f"<{tag}>\n{json.dumps(value, indent=2, ensure_ascii=ascii_only)}\n</{tag}>"


WEATHER_CALLS = [
    {"role": "user", "content": "Wetter in Zürich?"},
    {"type": "function_call", "name": "get_weather", "arguments": '{"city": "Zürich"}', "call_id": "c1"},
    {"type": "function_call_output", "call_id": "c1", "output": "21 °C"},
    {"role": "assistant", "content": "Ich prüfe morgen."},
    {"type": "function_call", "name": "get_weather", "arguments": '{"city": "Zürich", "day": "morgen"}',
     "call_id": "c2"},
    {"type": "function_call_output", "call_id": "c2", "output": "18 °C"},
    {"role": "assistant", "content": "Heute 21 °C, morgen 18 °C."},
]


@pytest.mark.parametrize("ascii_only", [False, True])
def test_an_assistant_turn_between_tool_calls_keeps_its_calls_under_one_prefix(ascii_only: bool) -> None:
    conv = convert_items(WEATHER_CALLS, answer_start=6)
    first = {"city": "Zürich"}
    second = {"city": "Zürich", "day": "morgen"}
    expected = "\n\n".join([
        "User: Wetter in Zürich?",
        "Assistant: " + block("tool_call", {"name": "get_weather", "arguments": first, "call_id": "c1"},
                              ascii_only=ascii_only),
        "Tool: " + block("tool_response", {"name": "get_weather", "call_id": "c1", "output": "21 °C"},
                         ascii_only=ascii_only),
        "Assistant: Ich prüfe morgen.",
        block("tool_call", {"name": "get_weather", "arguments": second, "call_id": "c2"}, ascii_only=ascii_only),
        "Tool: " + block("tool_response", {"name": "get_weather", "call_id": "c2", "output": "18 °C"},
                         ascii_only=ascii_only),
        "Assistant:"])
    assert render_prompt(conv, settings=Settings(ascii_json=ascii_only)) == expected
    assert render_response(conv) == "Heute 21 °C, morgen 18 °C."


WEB = "https://example.org/weather"
MIXED_CALLS = [
    {"role": "user", "content": "q"},
    {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c1"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "w", "sources": [{"type": "url", "url": WEB}]}},
    {"type": "function_call_output", "call_id": "c1", "output": "one"},
    {"type": "function_call", "name": "g", "arguments": "{}", "call_id": "c2"},
    {"role": "assistant", "content": "done"},
]


def mixed_turns(content: str) -> list[str]:
    """The blocks of `MIXED_CALLS` after the question: a web result and a tool's response in a row."""
    return [
        "Assistant: " + block("tool_call", {"name": "f", "arguments": {}, "call_id": "c1"}),
        block("tool_call", {"name": "web_search_call", "arguments": {"query": "w"}, "call_id": "ws_1"}),
        "Tool: " + block("tool_response", {"name": "web_search_call", "call_id": "ws_1",
                                           "output": [{"url": WEB, "content": content}]}),
        block("tool_response", {"name": "f", "call_id": "c1", "output": "one"}),
        "Assistant: " + block("tool_call", {"name": "g", "arguments": {}, "call_id": "c2"}),
    ]


def test_a_web_result_and_a_tool_response_in_a_row_share_one_prefix() -> None:
    conv = convert_items(MIXED_CALLS, answer_start=5)
    prompt = render_prompt(conv, {WEB: Page(url=WEB, status="ok", text="Sunny.")})
    assert prompt.split(SCHEMA_END, 1)[1] == "\n\n".join(["User: q", *mixed_turns("Sunny."), "Assistant:"])


def test_a_response_that_searched_shows_its_own_pages_or_says_they_are_missing() -> None:
    conv = convert_items(MIXED_CALLS, answer_start=1)
    shown = render_response(conv, {WEB: Page(url=WEB, status="ok", text="Sunny.")})
    assert shown == "\n\n".join([*mixed_turns("Sunny."), "done"]).removeprefix("Assistant: ")
    missing = ("This page could not be retrieved (offline_miss: no page was available). Its content is unknown; "
               "nothing here confirms or refutes what the answer says about it.")
    assert render_response(conv) == "\n\n".join([*mixed_turns(missing), "done"]).removeprefix("Assistant: ")


SCHEMA_END = "may optionally include a call_id, which should be ignored.\n\n"


CHAT_WEATHER = [
    {"role": "user", "content": "Wetter in Zürich?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "21 °C"},
]


@pytest.mark.parametrize("ascii_only", [False, True])
def test_chat_tool_calls_keep_unicode_unless_ascii_is_asked_for(ascii_only: bool) -> None:
    answer = {"role": "assistant", "content": "Ich frage nach.", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}}]}
    conv = convert_chat(CHAT_WEATHER, answer=answer)
    settings = Settings(ascii_json=ascii_only)
    call = {"name": "get_weather", "arguments": {"city": "Zürich"}}
    assert render_prompt(conv, settings=settings) == "\n\n".join([
        "User: Wetter in Zürich?",
        "Assistant: " + block("tool_call", {**call, "call_id": "c1"}, ascii_only=ascii_only),
        "Tool: " + block("tool_response", {"name": "get_weather", "call_id": "c1", "output": "21 °C"},
                         ascii_only=ascii_only),
        "Assistant:"])
    assert render_response(conv, settings=settings) == "Ich frage nach.\n" + block("tool_call", call,
                                                                                   ascii_only=ascii_only)


def test_a_web_result_after_a_tool_response_shares_its_prefix() -> None:
    """Two tools called at once may answer in either order: the role changes once, so one prefix."""
    conv = Conversation(turns=(
        Message(role="user", text="q"),
        ToolCall(name="f", arguments={}, call_id="c1"),
        ToolCall(name="web_search_call", arguments={"query": "w"}, call_id="ws_1", server=True),
        ToolResult(name="f", call_id="c1", output="one"),
        WebResult(name="web_search_call", call_id="ws_1", refs=(WebRef(url=WEB),))))
    assert render_prompt(conv, {WEB: Page(url=WEB, status="ok", text="Sunny.")}) == "\n\n".join([
        "User: q",
        "Assistant: " + block("tool_call", {"name": "f", "arguments": {}, "call_id": "c1"}),
        block("tool_call", {"name": "web_search_call", "arguments": {"query": "w"}, "call_id": "ws_1"}),
        "Tool: " + block("tool_response", {"name": "f", "call_id": "c1", "output": "one"}),
        block("tool_response", {"name": "web_search_call", "call_id": "ws_1",
                                "output": [{"url": WEB, "content": "Sunny."}]}),
        "Assistant:"])


def test_render_hands_over_the_response_rendered_with_the_same_pages_and_settings() -> None:
    searched = convert_items(MIXED_CALLS, answer_start=1)
    pages = {WEB: Page(url=WEB, status="ok", text="Sunny.")}
    scored = render(searched, pages)
    assert scored.response == render_response(searched, pages) and "Sunny." in scored.response
    assert scored.conversation is searched
    called = convert_items(WEATHER_CALLS, answer_start=1)
    escaped = render(called, settings=Settings(ascii_json=True)).response
    assert escaped == render_response(called, settings=Settings(ascii_json=True)) and "Z\\u00fcrich" in escaped
