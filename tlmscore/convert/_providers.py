"""Search-augmented Chat Completions: the search becomes a web search pair.

Perplexity Sonar and alike search before they answer and return the pages they used:
`search_results[]` (title, url, snippet, date), or else top-level `citations[]` (URL strings or
objects), numbered `[n]` in the answer. OpenAI's search models (gpt-4o-search-preview and alike)
log `message.annotations[].url_citation` (url, title, start/end index; OpenRouter adds the page
excerpt the model saw as `content`) instead: the cited pages are the search's sources. The record is
rebuilt as Responses items — the chat history, a `web_search_call` whose sources are the numbered
pages (with their logged snippet and date), and the answer with a `url_citation` for every marker
or annotation — so the pages become evidence like any other web search's. A marker with no source
(`[5]` of 4) becomes an `unresolved_citation`, warned about. The query is not logged; the call
shows the user's last message as its query.
"""

from __future__ import annotations

import re
from typing import Any

from tlmscore._content import content_text
from tlmscore.convert._messages import REASONING_FIELDS
from tlmscore.convert._web import SYNTHETIC

_MARKER = re.compile(r"\[(\d{1,4})\]|\u3010(\d{1,4})\u3011")
_SOURCE_FIELDS = ("title", "snippet", "date", "last_updated")


def chat_search_sources(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The pages a search-augmented answer used, numbered as the answer numbers them.

    `search_results` first (with what the provider logged: title, snippet, date), else `citations`.
    """
    results = response.get("search_results")
    listed = results if isinstance(results, list) and results else response.get("citations") or []
    sources: list[dict[str, Any]] = []
    for listed_entry in listed if isinstance(listed, list) else []:
        entry = {"url": listed_entry} if isinstance(listed_entry, str) and listed_entry else listed_entry
        if isinstance(entry, dict) and entry.get("url"):
            source = {"type": "url", "url": str(entry["url"]), "number": len(sources) + 1}
            source |= {k: entry[k] for k in _SOURCE_FIELDS if isinstance(entry.get(k), str) and entry[k]}
            if "date" not in source and "last_updated" in source:
                source["date"] = source["last_updated"]
            source.pop("last_updated", None)
            sources.append(source)
    return sources


def _message(response: dict[str, Any]) -> dict[str, Any]:
    choices = response.get("choices") or [{}]
    message = choices[0].get("message") if isinstance(choices, list) and isinstance(choices[0], dict) else None
    return message if isinstance(message, dict) else {}


def _url_citations(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The `url_citation` objects of the answer's annotations that name a URL."""
    annotations = _message(response).get("annotations") or []
    inner = [ann.get("url_citation") for ann in annotations if isinstance(ann, dict)]
    return [i for i in inner if isinstance(i, dict) and i.get("url")]


def chat_annotations(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's `url_citation` annotations (OpenAI search models), in the Responses shape."""
    fields = ("url", "title", "start_index", "end_index")
    return [{"type": "url_citation"} | {k: c[k] for k in fields if k in c} for c in _url_citations(response)]


def _annotated_sources(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The pages an annotated answer cites, once each, with the excerpt the provider logged.

    OpenRouter and alike put the text the model saw of a page in `url_citation.content`.
    """
    sources: dict[str, dict[str, Any]] = {}
    for inner in _url_citations(response):
        if str(inner["url"]) not in sources:
            source = {"type": "url", "url": str(inner["url"])}
            source |= {k: inner[k] for k in ("title",) if isinstance(inner.get(k), str) and inner[k]}
            if isinstance(inner.get("content"), str) and inner["content"].strip():
                source["snippet"] = inner["content"]
            sources[source["url"]] = source
    return list(sources.values())


def is_search_chat(response: dict[str, Any]) -> bool:
    """A chat answer that searched: it logs its pages or cites them in annotations."""
    return bool(chat_search_sources(response) or chat_annotations(response))


def _annotations(text: str, sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A `url_citation` for every `[n]` marker with its number, or an `unresolved_citation`.

    The marker's own span is kept; the cited sentence is the one its run of markers closes.
    """
    found: list[dict[str, Any]] = []
    for marker in _MARKER.finditer(text):
        if text.startswith("[[", marker.start() - 1) or text.startswith("](", marker.end()):
            continue  # part of an xAI marker or a markdown link, read by the citation model itself
        number = int(marker.group(1) or marker.group(2))
        span = {"start_index": marker.start(), "end_index": marker.end(), "number": number}
        if not 1 <= number <= len(sources):
            found.append({"type": "unresolved_citation", **span})
            continue
        source = sources[number - 1]
        found.append({"type": "url_citation", "url": source["url"], **span}
                     | ({"title": source["title"]} if source.get("title") else {}))
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


def _answer_items(message: dict[str, Any], text: str, annotations: list[dict[str, Any]],
                  reasoning: dict[str, Any]) -> list[dict[str, Any]]:
    """The answering message as Responses items: its text with `annotations`, then its tool calls."""
    calls = [i for i in _history_item({**message, "content": None}) if i.get("type") == "function_call"]
    return [{"type": "message", "role": "assistant", **reasoning, "content": [
        {"type": "output_text", "text": text, "annotations": annotations}]}, *calls]


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
    action: dict[str, Any] = {"type": "search", "query": users[-1] if users else None,
                              "sources": sources or _annotated_sources(response)}
    items.append({"type": "web_search_call", "id": f"search_{response.get('id') or ''}", "status": "completed",
                  "action": action, SYNTHETIC: True})
    message = _message(response)
    text = content_text(message.get("content"))
    annotations = _annotations(text, sources) if sources else chat_annotations(response)
    reasoning = {k: message[k] for k in REASONING_FIELDS if message.get(k)}  # warned about where it is shown
    return [*items, *_answer_items(message, text, annotations, reasoning)], len(items)


def chat_items(messages: list[dict[str, Any]], response: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Responses items for a chat record (its history, then the answer), and where its answer starts.

    For an answer read from a trace whose citations survive only as links: as Responses items, the
    pages it links can be shown apart as cited by it (`tlmscore.convert._web.linked_pages`).
    """
    items = [item for msg in messages if isinstance(msg, dict) for item in _history_item(msg)]
    message = _message(response)
    return [*items, *_answer_items(message, content_text(message.get("content")), [], {})], len(items)
