"""Search-augmented Chat Completions (Perplexity Sonar and alike): the search becomes a web search pair.

Such a provider searches before it answers and returns the pages it used: `search_results[]`
(title, url, snippet, date), or else top-level `citations[]` (URL strings or objects), with `[n]`
markers in the answer. The record is rebuilt as Responses items — the chat history, a
`web_search_call` whose sources are those pages, and the answer with a `url_citation` for every
marker — so the pages become evidence like any other web search's. The query is not logged; the
call shows the user's last message as its query.
"""

from __future__ import annotations

import re
from typing import Any

from tlmscore.convert.content import content_text

__all__ = ["chat_search_items", "chat_search_sources", "chat_tools_as_responses"]

_MARKERS = re.compile(r"(?:\[\d{1,3}\])+")
_NUMBER = re.compile(r"\d+")


def chat_search_sources(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The pages a search-augmented answer used: `search_results` first, else `citations`."""
    results = response.get("search_results")
    if isinstance(results, list) and results:
        return [{"url": str(r["url"]), "title": r.get("title")}
                for r in results if isinstance(r, dict) and r.get("url")]
    sources: list[dict[str, Any]] = []
    for cite in response.get("citations") or []:
        if isinstance(cite, str) and cite:
            sources.append({"url": cite, "title": None})
        elif isinstance(cite, dict) and cite.get("url"):
            sources.append({"url": str(cite["url"]), "title": cite.get("title")})
    return sources


def _annotations(text: str, sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A `url_citation` for every `[n]` marker, spanning its run of markers (`…1930.[1][2]`).

    The span stands right after the sentence it backs, as OpenAI's inline citations do, so the
    cited claim is found the same way for both.
    """
    found: list[dict[str, Any]] = []
    for run in _MARKERS.finditer(text):
        for number in (int(n) for n in _NUMBER.findall(run.group(0))):
            if not 1 <= number <= len(sources):
                continue
            source = sources[number - 1]
            ann: dict[str, Any] = {"type": "url_citation", "url": source["url"], "start_index": run.start(),
                                   "end_index": run.end()}
            if source.get("title"):
                ann["title"] = source["title"]
            found.append(ann)
    return found


def _history_item(msg: dict[str, Any]) -> list[dict[str, Any]]:
    """A Chat Completions message as Responses items (tool calls and tool results included)."""
    role = str(msg.get("role") or "user")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": msg.get("tool_call_id"), "output": msg.get("content")}]
    items: list[dict[str, Any]] = []
    if msg.get("content") or not msg.get("tool_calls"):
        item = {"role": role, "content": content_text(msg.get("content"))}
        items.append(item | ({"name": msg["name"]} if msg.get("name") else {}))
    for call in msg.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            items.append({"type": "function_call", "name": function.get("name"),
                          "arguments": function.get("arguments"), "call_id": call.get("id")})
    return items


def chat_tools_as_responses(tools: Any) -> list[dict[str, Any]]:
    """Chat Completions function tools in the Responses shape (`name` at the top level)."""
    converted: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            converted.append({"type": "function", **function})
    return converted


def chat_search_items(messages: list[dict[str, Any]], response: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Responses items for a search-augmented chat record, and where its answer starts."""
    items = [item for msg in messages if isinstance(msg, dict) for item in _history_item(msg)]
    users = [content_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    sources = chat_search_sources(response)
    items.append({"type": "web_search_call", "id": f"search_{response.get('id') or ''}", "status": "completed",
                  "action": {"type": "search", "query": users[-1] if users else None,
                             "sources": [{"type": "url", "url": s["url"]} for s in sources]}})
    start = len(items)
    choices = response.get("choices") or [{}]
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    message = message if isinstance(message, dict) else {}
    text = content_text(message.get("content"))
    items.append({"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": text, "annotations": _annotations(text, sources)}]})
    items.extend(i for i in _history_item({**message, "content": None}) if i.get("type") == "function_call")
    return items, start
