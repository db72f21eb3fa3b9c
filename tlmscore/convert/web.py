"""`web_search_call`: synthetic calls whose results are references to the pages the model saw.

Which URLs a search result holds follows `Settings.urls`:
`cited` — the `url_citation` URLs of the next assistant message that belong to this search (its
sources, or any unclaimed citation for the last search before that message), falling back to the
search's sources when it has no citation; `sources` — the search's `action.sources`; `all` — both.
`open_page` and `find_in_page` always refer to their own URL.

xAI logs its searches with `arguments` instead of an `action` (a call with a `url` and no `query`
opens that page), and its X search as `x_search_call` items named after the function that ran;
their results are the posts the answer cites.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import ToolCall, Turn, WebRef, WebResult
from tlmscore.urls import url_key

__all__ = ["CONVERTERS", "OPEN_PAGE", "WEB_SEARCH", "X_SEARCH", "Citation", "citations_of", "cited_sentence"]

WEB_SEARCH = "web_search_call"
X_SEARCH = "x_search_call"
_SEARCHES = (WEB_SEARCH, X_SEARCH)
OPEN_PAGE = "open_page"
FIND_IN_PAGE = "find_in_page"
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


@dataclass(frozen=True)
class Citation:
    """A `url_citation` annotation with the sentence of the answer it supports."""

    url: str
    title: str | None
    sentence: str


def _sentence_ends(text: str) -> list[int]:
    """Positions just after each sentence end: `.!?` before white space or the end, or a newline."""
    return [m.end() for m in _SENTENCE_END.finditer(text)]


def cited_sentence(text: str, start: int, end: int, ends: Sequence[int] | None = None) -> str:
    """The claim a citation span supports.

    That is the sentence containing the span or, when the span stands right after a sentence
    (OpenAI puts `([site](url))` after the period), that sentence and the span. A period inside a
    number, a version or a URL does not end a sentence. `ends` is `_sentence_ends(text)`, for a
    caller that asks about many spans of one text.
    """
    if not 0 <= start <= end <= len(text):
        return ""
    if ends is None:
        ends = _sentence_ends(text)
    anchor = start
    while anchor > 0 and text[anchor - 1] in " \t":
        anchor -= 1
    before_anchor = bisect.bisect_left(ends, anchor)
    if anchor > 0 and before_anchor < len(ends) and ends[before_anchor] == anchor:
        left = ends[before_anchor - 1] if before_anchor else 0
        return text[left:end].strip()
    at_start = bisect.bisect_right(ends, start)
    left = ends[at_start - 1] if at_start else 0
    at_end = bisect.bisect_left(ends, end)
    right = ends[at_end] if at_end < len(ends) else len(text)
    return text[left:right].strip()


def citations_of(item: dict[str, Any]) -> list[Citation]:
    """The `url_citation` annotations of a message item, in order."""
    found: list[Citation] = []
    for part in item.get("content") or []:
        if not isinstance(part, dict):
            continue
        text = str(part.get("text") or "")
        ends: list[int] | None = None
        for ann in part.get("annotations") or []:
            if not isinstance(ann, dict) or ann.get("type") != "url_citation" or not ann.get("url"):
                continue
            start, end = ann.get("start_index"), ann.get("end_index")
            sentence = ""
            if isinstance(start, int) and isinstance(end, int):
                ends = _sentence_ends(text) if ends is None else ends
                sentence = cited_sentence(text, start, end, ends)
            title = ann.get("title") if isinstance(ann.get("title"), str) else None
            found.append(Citation(url=str(ann["url"]), title=title, sentence=sentence))
    return found


def _action(item: dict[str, Any]) -> dict[str, Any]:
    """The call's action; providers that log `arguments` instead are read as a search."""
    action = item.get("action")
    if isinstance(action, dict):
        return action
    raw = item.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw else (raw or {})
    except json.JSONDecodeError:
        args = {"query": raw}
    if not isinstance(args, dict):
        return {"type": "search", "query": str(args)}
    if args.get("url") and not args.get("query"):
        return {**args, "type": OPEN_PAGE}
    return {"type": "search", **args}


def _source_urls(action: dict[str, Any]) -> list[str]:
    sources = action.get("sources") or []
    return [str(s["url"]) for s in sources if isinstance(s, dict) and s.get("url") and s.get("type", "url") == "url"]


def _own_urls(item: dict[str, Any]) -> list[str]:
    action = _action(item)
    if action.get("type") in (OPEN_PAGE, FIND_IN_PAGE):
        return [str(action["url"])] if action.get("url") else []
    return _source_urls(action)


def _group(ctx: Context) -> tuple[list[int], dict[str, Any] | None]:
    """Web calls between the previous and the next message, and that next message."""
    items = ctx.items
    start = ctx.index
    while start > 0 and items[start - 1].get("type") != "message":
        start -= 1
    members: list[int] = []
    following: dict[str, Any] | None = None
    for j in range(start, len(items)):
        kind = items[j].get("type")
        if kind == "message" and j > ctx.index:
            following = items[j]
            break
        if kind in _SEARCHES:
            members.append(j)
    return members, following


def _cited_for_this_call(ctx: Context) -> list[Citation]:
    members, following = _group(ctx)
    if following is None:
        return []
    cites = citations_of(following)
    own = {url_key(u) for u in _own_urls(ctx.items[ctx.index])}
    claimed = {url_key(u) for j in members for u in _own_urls(ctx.items[j])}
    searches = [j for j in members if _action(ctx.items[j]).get("type") not in (OPEN_PAGE, FIND_IN_PAGE)]
    is_last = bool(searches) and searches[-1] == ctx.index
    return [c for c in cites if url_key(c.url) in own or (is_last and url_key(c.url) not in claimed)]


def _refs(cited: Iterable[Citation], sources: Iterable[str]) -> tuple[WebRef, ...]:
    """Unique pages in order of first mention, each with every answer sentence citing it."""
    order: list[str] = []
    urls: dict[str, str] = {}
    titles: dict[str, str | None] = {}
    spans: dict[str, list[str]] = {}
    for url, title, sentence in [(c.url, c.title, c.sentence) for c in cited] + [(u, None, "") for u in sources]:
        key = url_key(url)
        if key not in urls:
            order.append(key)
            urls[key], titles[key], spans[key] = url, title, []
        titles[key] = titles[key] or title
        if sentence and sentence not in spans[key]:
            spans[key].append(sentence)
    return tuple(WebRef(url=urls[k], title=titles[k], cited=tuple(spans[k])) for k in order)


def _search_refs(action: dict[str, Any], ctx: Context) -> tuple[WebRef, ...]:
    """The pages a search result refers to, following the URL policy."""
    sources = _source_urls(action)
    cited = _cited_for_this_call(ctx) if ctx.urls in ("cited", "all") else []
    if ctx.urls == "sources" or (ctx.urls == "cited" and not cited):
        refs = _refs([], sources)
    elif ctx.urls == "all":
        refs = _refs(cited, sources)
    else:
        refs = _refs(cited, [])
    return refs


def _search(item: dict[str, Any], action: dict[str, Any], ctx: Context) -> list[Turn]:
    call_id = str(item.get("id") or "")
    query = action.get("query")
    if query is None and action.get("queries"):
        query = " | ".join(str(q) for q in action["queries"])
    refs = _search_refs(action, ctx)
    if action.get("sources") is None and not refs and isinstance(item.get("action"), dict):
        ctx.warn("web_search_call has no sources: add include=['web_search_call.action.sources'] to the request")
    elif not refs:
        ctx.warn("web_search_call has no results in the log and the answer cites no page")
    return [
        ToolCall(name=WEB_SEARCH, arguments={"query": query}, call_id=call_id, server=True),
        WebResult(name=WEB_SEARCH, call_id=call_id, refs=refs),
    ]


def _page_action(item: dict[str, Any], action: dict[str, Any], ctx: Context) -> list[Turn]:
    call_id = str(item.get("id") or "")
    kind = str(action["type"])
    url = str(action.get("url") or "")
    ctx.use_tool(f"web_search.{kind}")
    arguments: dict[str, Any] = {"url": url}
    focus: tuple[str, ...] = ()
    if kind == FIND_IN_PAGE:
        arguments["pattern"] = action.get("pattern")
        focus = (str(action.get("pattern") or ""),)
    refs: tuple[WebRef, ...] = ()
    if url:
        cites = [c for c in citations_of(_group(ctx)[1] or {}) if url_key(c.url) == url_key(url)]
        title = next((c.title for c in cites if c.title), None)
        spans = tuple(dict.fromkeys(c.sentence for c in cites if c.sentence))
        refs = (WebRef(url=url, title=title, cited=spans),)
    else:
        ctx.warn(f"web_search_call {kind} has no URL")
    return [
        ToolCall(name=kind, arguments=arguments, call_id=call_id, server=True),
        WebResult(name=kind, call_id=call_id, refs=refs, focus=focus),
    ]


def convert_web_search(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A web search, page open or find-in-page, as a call and a web result."""
    ctx.use_tool("web_search")
    action = _action(item)
    if action.get("type") in (OPEN_PAGE, FIND_IN_PAGE):
        return _page_action(item, action, ctx)
    if action.get("type") not in (None, "search"):
        ctx.warn(f"web_search_call action {action.get('type')!r} is unknown; rendered as a search")
    return _search(item, action, ctx)


def convert_x_search(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """An xAI X search: the function it ran with its arguments; the cited posts as its result."""
    name = str(item.get("name") or "x_search")
    call_id = str(item.get("id") or item.get("call_id") or "")
    ctx.use_tool(f"server_function:{name}", {"type": "server_function", "name": name,
                                             "description": "Search posts on X (xAI's x_search tool)."})
    action = _action(item)
    arguments = {k: v for k, v in action.items() if k != "type"}
    return [ToolCall(name=name, arguments=arguments, call_id=call_id, server=True),
            WebResult(name=name, call_id=call_id, refs=_search_refs(action, ctx))]


CONVERTERS: dict[str, ItemConverter] = {
    WEB_SEARCH: ItemConverter(convert_web_search),
    X_SEARCH: ItemConverter(convert_x_search),
}
