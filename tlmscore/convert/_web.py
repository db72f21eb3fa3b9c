"""`web_search_call`: synthetic calls whose results are references to the pages the model saw.

Which URLs a search result holds follows `Settings.urls`:
`cited` — the citations of the next assistant message that belong to this search, falling back to
the searches' sources only when the answer cites nothing at all (a search the answer cites nothing
of then says so); `sources` — the search's `action.sources`; `all` — both. A search whose results
were not logged, and that the answer cites nothing of, says that what it found is unknown (never
an empty result).
`open_page` and `find_in_page` always refer to their own URL.

Provenance is kept honest. A citation belongs to the calls whose logged results hold its URL. A
search that logged no results (no `include`, or a provider that does not log them) is given the
citations no other call holds, of its own kind: web pages to a web search, posts on X to an X
search (or, without one, to a web search). What is left is shown apart, as cited by the answer
but among no logged result, with a warning. A failed call is shown as failed. An answer read
from a trace that kept no search item (`linked_pages`) has its cited pages shown apart the same
way, as cited by the answer, the search that found them not in the trace. Numbered sources
(`[n]`) keep the answer's numbering, and the provider's logged snippet and date stay beside each
page.

xAI logs its searches with `arguments` instead of an `action` (a call with a `url` and no `query`
opens that page, e.g. `browse_page` with its `instructions`), and its X search as `x_search_call`
items named after the function that ran; their results are the posts the answer cites.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tlmscore._tables import json_cell
from tlmscore._urls import host_of, url_key
from tlmscore.convert._citations import Citation, message_citations, plain_title
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import ToolCall, ToolResult, Turn, WebRef, WebResult, item_type

WEB_SEARCH = "web_search_call"
X_SEARCH = "x_search_call"
_SEARCHES = (WEB_SEARCH, X_SEARCH)
OPEN_PAGE = "open_page"
FIND_IN_PAGE = "find_in_page"
_PAGE_ACTIONS = (OPEN_PAGE, FIND_IN_PAGE)
CITED_SOURCES = "cited_sources"
SYNTHETIC = "tlmscore_synthetic"
"""Key of a web call rebuilt from a chat record: its missing sources are no advice to `include` them."""
SEARCH_NOT_LOGGED = ("The search results were not recorded in this log (the request did not include "
                     "'web_search_call.action.sources', or the provider does not log them), so what the search "
                     "found is unknown.")
UNCITED = ("This search returned {n} result(s); the answer cites none of them (it cites pages of other calls), "
           "so they are not shown here.")
LINKED_NOTE = ("Pages the answer cites; the search that found them is not in the trace, so what the model "
               "read of them is not known.")
_X_HOSTS = frozenset({"x.com", "twitter.com", "mobile.twitter.com", "www.x.com", "www.twitter.com"})


def _action(item: dict[str, Any]) -> dict[str, Any]:
    """The call's action; providers that log `arguments` instead are read as a search."""
    action = item.get("action")
    if isinstance(action, dict):
        return action
    args = json_cell(item.get("arguments") or {})
    if not isinstance(args, dict):
        return {"type": "search", "query": str(args)}
    if args.get("url") and not args.get("query"):
        return {**args, "type": OPEN_PAGE}
    return {"type": "search", **args}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _sources(action: dict[str, Any]) -> list[WebRef]:
    """The pages a search's logged result lists, with what the provider logged about each (not yet cited)."""
    found: list[WebRef] = []
    for s in action.get("sources") or []:
        if isinstance(s, dict) and s.get("url") and s.get("type", "url") == "url":
            number = s.get("number") if isinstance(s.get("number"), int) else None
            found.append(WebRef(url=str(s["url"]), title=plain_title(s.get("title")), snippet=_text(s.get("snippet")),
                                 date=_text(s.get("date")), number=number))
    return found


def _failed(item: dict[str, Any]) -> bool:
    return item.get("status") == "failed"


def _own_urls(item: dict[str, Any]) -> list[str]:
    action = _action(item)
    if action.get("type") in _PAGE_ACTIONS:
        return [str(action["url"])] if action.get("url") else []
    return [s.url for s in _sources(action)]


def _takes_unclaimed(item: dict[str, Any]) -> bool:
    """A search that logged no results: the answer's citations are all that is known of them."""
    action = _action(item)
    return action.get("type") not in _PAGE_ACTIONS and action.get("sources") is None and not _failed(item)


def call_group(ctx: Context, kinds: Sequence[str] = _SEARCHES) -> tuple[list[int], dict[str, Any] | None]:
    """Where the calls of `kinds` between the previous and the next message are, and that next message."""
    items = ctx.items
    start = ctx.index
    while start > 0 and item_type(items[start - 1]) != "message":
        start -= 1
    members: list[int] = []
    following: dict[str, Any] | None = None
    for j in range(start, len(items)):
        if item_type(items[j]) == "message" and j > ctx.index:
            following = items[j]
            break
        if items[j].get("type") in kinds:
            members.append(j)
    return members, following


@dataclass(frozen=True)
class _Assignment:
    """Which call of a group each citation of the following message belongs to."""

    by_call: dict[int, list[Citation]]
    unlogged: list[Citation]
    unresolved: list[Citation]

    @property
    def cites(self) -> bool:
        """Whether the answer cites any page at all."""
        return bool(self.unlogged) or any(self.by_call.values())


def _assign(ctx: Context) -> _Assignment:
    """The citations of the assistant message after this call's group, given to the group's calls.

    A citation goes to every call whose logged result holds its URL; else to the last search of
    its kind that logged no results; else it is unlogged. Markers naming no source are unresolved.
    """
    members, following = call_group(ctx)
    answered = following is not None and following.get("role", "assistant") == "assistant"
    cites = message_citations(following) if answered and following is not None else []
    by_call: dict[int, list[Citation]] = {j: [] for j in members}
    owners = {j: {url_key(u) for u in _own_urls(ctx.items[j])} for j in members}
    takers = [j for j in members if _takes_unclaimed(ctx.items[j])]
    unlogged: list[Citation] = []
    for cite in (c for c in cites if c.kind == "url"):
        key = url_key(cite.url)
        holders = [j for j in members if key in owners[j]]
        if not holders:  # a web search may have found a post on X; an X search never a web page
            wanted = (X_SEARCH, WEB_SEARCH) if host_of(cite.url) in _X_HOSTS else (WEB_SEARCH,)
            holders = next(([j] for kind in wanted for j in reversed(takers) if ctx.items[j].get("type") == kind),
                           [])
        for j in holders:
            by_call[j].append(cite)
        if not holders:
            unlogged.append(cite)
    return _Assignment(by_call, unlogged, [c for c in cites if c.kind == "unresolved"])


def _refs(cited: Iterable[Citation], sources: Iterable[WebRef]) -> tuple[WebRef, ...]:
    """Unique pages, each with every answer sentence citing it.

    Pages the answer numbers are listed by their numbers; others in order of first mention.
    """
    refs: dict[str, dict[str, Any]] = {}
    rows = [(c.url, c.title, c.sentence, c.number, None) for c in cited] + \
        [(s.url, s.title, "", s.number, s) for s in sources]
    for url, title, sentence, number, source in rows:
        ref = refs.setdefault(url_key(url), {"url": url, "title": None, "cited": [], "number": None, "snippet": None,
                                             "date": None})
        ref["title"] = ref["title"] or title
        ref["number"] = ref["number"] if ref["number"] is not None else number
        if source is not None:
            ref["snippet"], ref["date"] = ref["snippet"] or source.snippet, ref["date"] or source.date
        if sentence and sentence not in ref["cited"]:
            ref["cited"].append(sentence)
    found = [WebRef(**{**ref, "cited": tuple(ref["cited"])}) for ref in refs.values()]
    return tuple(sorted(found, key=lambda ref: (ref.number is None, ref.number or 0)))  # stable: ties keep their order


def _search_refs(action: dict[str, Any], ctx: Context, cited: list[Citation],
                 answer_cites: bool = False) -> tuple[WebRef, ...]:
    """The pages a search result refers to, following the URL policy.

    With `cited`, a search's sources are shown only when the answer cites nothing at all
    (`answer_cites` false): an answer that cites pages is checked against those pages.
    """
    sources = _sources(action)
    if ctx.urls == "sources" or (ctx.urls == "cited" and not cited and not answer_cites):
        return _refs([], sources)
    if ctx.urls == "all":
        return _refs(cited, sources)
    by_key = {url_key(s.url): s for s in sources}
    return _refs(cited, [by_key[k] for k in dict.fromkeys(url_key(c.url) for c in cited) if k in by_key])


def _closing(ctx: Context, assignment: _Assignment) -> list[Turn]:
    """After the group's last call: the cited pages no logged result holds, shown apart."""
    members, _ = call_group(ctx)
    if not members or members[-1] != ctx.index:
        return []
    for cite in assignment.unresolved:
        ctx.warn(f"the answer cites [{cite.number}], but no logged source has that number")
    if not assignment.unlogged:
        return []
    refs = _refs(assignment.unlogged, [])
    shown = ctx.urls != "sources"
    ctx.warn(f"the answer cites {len(refs)} page(s) that no logged search result holds"
             + ("; shown apart as cited by the answer, not among the logged results" if shown else ""))
    return [WebResult(name=CITED_SOURCES, call_id="", refs=refs, unlogged=True)] if shown else []


def linked_pages(output: Iterable[dict[str, Any]], turns: Iterable[Turn],
                 urls: str) -> tuple[list[WebResult], str | None]:
    """The pages an answer read from a trace cites when the trace holds no search: shown apart, and a warning.

    Instrumentations that drop built-in tool items and citations leave an answer's markdown links:
    those pages are planned and fetched like any cited page, shown as cited by the answer (the
    search that found them is not in the trace). Nothing when the conversation has web results.
    """
    if any(isinstance(t, WebResult) for t in turns):
        return [], None
    cites = [c for item in output if item_type(item) == "message" for c in message_citations(item) if c.kind == "url"]
    if not cites:
        return [], None
    refs = _refs(cites, [])
    shown = urls != "sources"
    warning = (f"the answer cites {len(refs)} page(s) and the trace holds no search that found them"
               + ("; shown apart as cited by the answer" if shown else ""))
    result = WebResult(name=CITED_SOURCES, call_id="", refs=refs, unlogged=True, note=LINKED_NOTE)
    return ([result] if shown else []), warning


def _search_arguments(action: dict[str, Any]) -> dict[str, Any]:
    """The search as called: its query, and its `queries` as the list they are."""
    queries = action.get("queries")
    arguments: dict[str, Any] = {}
    if action.get("query") is not None or not queries:
        arguments["query"] = action.get("query")
    if isinstance(queries, list) and queries:
        arguments["queries"] = list(queries)
    return arguments


def _search(item: dict[str, Any], action: dict[str, Any], ctx: Context) -> list[Turn]:
    call_id = str(item.get("id") or "")
    assignment = _assign(ctx)
    if _failed(item):
        ctx.warn(f"web_search_call {call_id!r} failed: it returned no results")
        result: Turn = WebResult(name=WEB_SEARCH, call_id=call_id, refs=(), status="failed")
    else:
        refs = _search_refs(action, ctx, assignment.by_call.get(ctx.index, []), assignment.cites)
        logged = isinstance(item.get("action"), dict) and not item.get(SYNTHETIC)
        if action.get("sources") is None and not refs and logged:
            ctx.warn("web_search_call has no sources: add include=['web_search_call.action.sources'] to the request")
        elif not refs and not _sources(action):
            ctx.warn("web_search_call has no results in the log and the answer cites no page")
        result = _not_logged(WEB_SEARCH, call_id) if _unknown(action, refs) else \
            _uncited(WEB_SEARCH, call_id, action) if not refs and _sources(action) else \
            WebResult(name=WEB_SEARCH, call_id=call_id, refs=refs)
    call = ToolCall(name=WEB_SEARCH, arguments=_search_arguments(action), call_id=call_id, server=True)
    return [call, result, *_closing(ctx, assignment)]


def _unknown(action: dict[str, Any], refs: tuple[WebRef, ...]) -> bool:
    """A search whose results were not logged and that nothing else tells of: what it found is unknown."""
    return action.get("sources") is None and not refs


def _uncited(name: str, call_id: str, action: dict[str, Any]) -> ToolResult:
    """The response of a search the answer cites nothing of, while it cites other pages: said, not shown."""
    return ToolResult(name=name, call_id=call_id, output=UNCITED.format(n=len(_sources(action))))


def _not_logged(name: str, call_id: str) -> ToolResult:
    """The response of a search whose results were not logged: said to be unknown, not shown as empty."""
    return ToolResult(name=name, call_id=call_id, output=SEARCH_NOT_LOGGED)


def _page_action(item: dict[str, Any], action: dict[str, Any], ctx: Context) -> list[Turn]:
    call_id = str(item.get("id") or "")
    kind = str(action["type"])
    url = str(action.get("url") or "")
    ctx.use_tool(f"web_search.{kind}")
    arguments: dict[str, Any] = {"url": url, **{k: v for k, v in action.items() if k not in ("type", "url")}}
    focus = tuple(str(arguments[k]) for k in ("pattern", "instructions") if arguments.get(k))
    assignment = _assign(ctx)
    refs: tuple[WebRef, ...] = ()
    if _failed(item):
        ctx.warn(f"web_search_call {kind} {call_id!r} failed: the page was not read")
    elif url:
        cites = [c for c in assignment.by_call.get(ctx.index, []) if url_key(c.url) == url_key(url)]
        refs = tuple(replace(ref, url=url) for ref in _refs(cites, [WebRef(url=url)]))
    else:
        ctx.warn(f"web_search_call {kind} has no URL")
    status = "failed" if _failed(item) else "completed"
    return [
        ToolCall(name=kind, arguments=arguments, call_id=call_id, server=True),
        WebResult(name=kind, call_id=call_id, refs=refs, focus=focus, status=status),
        *_closing(ctx, assignment),
    ]


def convert_web_search(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A web search, page open or find-in-page, as a call and a web result."""
    ctx.use_tool("web_search")
    action = _action(item)
    if action.get("type") in _PAGE_ACTIONS:
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
    assignment = _assign(ctx)
    status = "failed" if _failed(item) else "completed"
    refs = () if _failed(item) else _search_refs(action, ctx, assignment.by_call.get(ctx.index, []),
                                                 assignment.cites)
    result: Turn = _not_logged(name, call_id) if not _failed(item) and _unknown(action, refs) else \
        WebResult(name=name, call_id=call_id, refs=refs, status=status)
    return [ToolCall(name=name, arguments=arguments, call_id=call_id, server=True), result,
            *_closing(ctx, assignment)]


CONVERTERS: dict[str, ItemConverter] = {
    WEB_SEARCH: ItemConverter(convert_web_search),
    X_SEARCH: ItemConverter(convert_x_search),
}
