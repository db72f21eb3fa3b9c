"""Render: a conversation and its pages become the prompt and response strings, in the TLM format.

Pure: the same conversation, pages and settings give the same bytes in every process. Where the
reference formatter (cleanlab-tlm 1.1.39) is right this matches it byte for byte; web evidence is
rendered in a stable order, keeps Unicode, and says plainly when a page could not be retrieved.
Every JSON block keeps Unicode too, unless `Settings.ascii_json` asks for the reference's escaping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from tlmscore.evidence.page import Page, find_page
from tlmscore.excerpt import allocate, excerpt
from tlmscore.model import Conversation, Message, ScoringInput, ToolCall, ToolResult, Turn, WebRef, WebResult
from tlmscore.settings import Settings

__all__ = [
    "TOOL_CALL_SCHEMA",
    "TOOL_DEFINITIONS_PREFIX",
    "render",
    "render_prompt",
    "render_response",
    "tools_section",
    "unavailable_text",
]

SYSTEM_ROLES = ("system", "developer")
TOOL_DEFINITIONS_PREFIX = (
    "You are an AI Assistant that can call provided tools (a.k.a. functions). "
    "The set of available tools is provided to you as function signatures within "
    "<tools> </tools> XML tags. "
    "You may call one or more of these functions to assist with the user query. If the provided functions "
    "are not helpful/relevant, then just respond in natural conversational language. "
    "After you choose to call a function, you will be provided with the function's results within "
    "<tool_response> </tool_response> XML tags.\n\n<tools>\n"
)
TOOL_CALL_SCHEMA = (
    "For each function call return a JSON object, with the following pydantic model json schema:\n"
    "{'name': <function-name>, 'arguments': <args-dict>}\n"
    "Each function call should be enclosed within <tool_call> </tool_call> XML tags.\n"
    "Example:\n<tool_call>\n{'name': <function-name>, 'arguments': <args-dict>}\n</tool_call>\n"
    "Note: Function calls and their results may optionally include a call_id, which should be ignored."
)
_PREFIXES = {"system": "System: ", "developer": "System: ", "user": "User: ", "assistant": "Assistant: "}


def tools_section(tools: Sequence[dict[str, Any]], *, unicode: bool = False) -> str:
    """The system message that declares the tools (non-ASCII escaped, as the reference writes it, unless `unicode`)."""
    lines = "\n".join(_dumps(t, unicode, separators=(",", ":")) for t in tools)
    return f"{TOOL_DEFINITIONS_PREFIX}{lines}\n</tools>\n\n{TOOL_CALL_SCHEMA}"


def _prefix(label: str, previous: str | None) -> str:
    if label in SYSTEM_ROLES and previous in SYSTEM_ROLES:
        return ""
    return _PREFIXES.get(label, label.capitalize() + ": ")


def unavailable_text(page: Page) -> str:
    """What the scorer is told about a page that could not be retrieved: that, and why."""
    reason = page.error or page.status.replace("_", " ")
    return (f"This page could not be retrieved ({page.status}: {reason}). Its content is unknown; "
            "nothing here confirms or refutes what the answer says about it.")


class _Evidence:
    """Looks up pages and shares the evidence budget among the pages one prompt shows."""

    def __init__(self, pages: Mapping[str, Page], refs: Sequence[tuple[WebRef, tuple[str, ...]]],
                 settings: Settings) -> None:
        self._pages = pages
        self._texts = [self._page(ref.url).text or "" if self._page(ref.url).ok else "" for ref, _ in refs]
        self._budgets = allocate([len(t) for t in self._texts], settings.page_chars, settings.evidence_chars)
        self._next = 0

    def _page(self, url: str) -> Page:
        return find_page(self._pages, url)

    def entry(self, ref: WebRef, focus: tuple[str, ...]) -> dict[str, Any]:
        """One page as the web tool's response shows it: url, title when known, content."""
        page = self._page(ref.url)
        budget = self._budgets[self._next]
        self._next += 1
        entry: dict[str, Any] = {"url": ref.url}
        title = page.title or ref.title
        if title:
            entry["title"] = title
        if page.ok:
            entry["content"] = excerpt(page.text or "", budget, (*focus, *ref.cited))
        else:
            entry["content"] = unavailable_text(page)
        return entry


def _dumps(value: Any, unicode: bool, **options: Any) -> str:
    """`json.dumps` keeping Unicode when asked, unless the text cannot be UTF-8 (a lone surrogate): then escaped."""
    if unicode:
        text = json.dumps(value, ensure_ascii=False, **options)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return text
    return json.dumps(value, **options)


def _json_block(tag: str, value: dict[str, Any], *, unicode: bool = False) -> str:
    """A JSON block as the reference writes it (`indent=2`); with `unicode`, non-ASCII text is kept as it is."""
    return f"<{tag}>\n{_dumps(value, unicode, indent=2)}\n</{tag}>"


def _text_block(tag: str, value: dict[str, Any]) -> str:
    """`_json_block(tag, value, unicode=True)` for a value made of strings, lists and dicts only.

    For such values orjson writes the same bytes as `json.dumps(indent=2, ensure_ascii=False)`
    (the tests hold it to that) and is several times faster: the standard library's indenting
    encoder is pure Python, and these blocks carry whole web pages. A float would be written
    differently, so values that may hold numbers go through `_json_block`.
    """
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode("utf-8")
    except orjson.JSONEncodeError:  # e.g. a lone surrogate, which only the standard library writes
        return _json_block(tag, value, unicode=True)
    return f"<{tag}>\n{text}\n</{tag}>"


def _responses_parts(entries: Sequence[Turn], evidence: _Evidence, unicode: bool) -> list[str]:
    """The Responses-format body: a role prefix whenever the speaking role changes."""
    parts: list[str] = []
    previous: str | None = None
    for turn in entries:
        if isinstance(turn, Message):
            if previous is None or turn.role != previous:
                parts.append(_prefix(turn.name or turn.role, previous))
            parts.append(turn.text)
            previous = turn.role
        elif isinstance(turn, ToolCall):
            if previous != "assistant":
                parts.append("Assistant: ")
            parts.append(_json_block("tool_call", {"name": turn.name, "arguments": turn.arguments,
                                                   "call_id": turn.call_id}, unicode=unicode))
            previous = "assistant"
        else:
            if previous != "tool":
                parts.append("Tool: ")
            if isinstance(turn, WebResult):
                output: Any = [evidence.entry(ref, turn.focus) for ref in turn.refs]
                body = {"name": turn.name, "call_id": turn.call_id, "output": output}
                parts.append(_text_block("tool_response", body))
            else:
                body = {"name": turn.name, "call_id": turn.call_id, "output": turn.output}
                parts.append(_json_block("tool_response", body, unicode=unicode))
            previous = "tool"
        parts.append("\n\n")
    return parts


def _chat_parts(entries: Sequence[Turn], unicode: bool) -> list[str]:
    """The Chat Completions-format body, following the reference's rules for that format."""
    parts: list[str] = []
    previous: str | None = None
    for turn in entries:
        if isinstance(turn, ToolResult):
            body = {"name": turn.name, "call_id": turn.call_id, "output": turn.output}
            parts.append(f"Tool: {_json_block('tool_response', body, unicode=unicode)}\n\n")
        elif isinstance(turn, Message) and turn.role == "assistant":
            parts.append("Assistant: " + (f"{turn.text}\n\n" if turn.text else ""))
            for call in turn.calls:
                block = {"name": call.name, "arguments": call.arguments, "call_id": call.call_id}
                parts.append(_json_block("tool_call", block, unicode=unicode) + "\n\n")
        elif isinstance(turn, Message):
            parts.append(f"{_prefix(turn.name or turn.role, previous)}{turn.text}\n\n")
            previous = turn.role
    return parts


def _entries(conv: Conversation, unicode: bool) -> list[Turn]:
    """Turns with the instructions and the tools section inserted where the reference puts them."""
    entries = list(conv.turns)
    if conv.has_tools:
        leading = 0
        while leading < len(entries) and isinstance(entries[leading], Message) \
                and entries[leading].role in SYSTEM_ROLES:  # type: ignore[union-attr]
            leading += 1
        entries.insert(leading, Message(role="system", text=tools_section(conv.tools, unicode=unicode)))
    if conv.instructions is not None and conv.style == "responses":
        entries.insert(0, Message(role="system", text=conv.instructions))
    return entries


def _web_refs(turns: Sequence[Turn]) -> list[tuple[WebRef, tuple[str, ...]]]:
    return [(ref, t.focus) for t in turns if isinstance(t, WebResult) for ref in t.refs]


def render_prompt(conv: Conversation, pages: Mapping[str, Page] | None = None,
                  settings: Settings | None = None) -> str:
    """The prompt: everything the model saw before it answered, ending with `Assistant:`."""
    settings = settings or Settings()
    unicode = not settings.ascii_json
    entries = _entries(conv, unicode)
    if len(entries) == 1 and isinstance(entries[0], Message) and entries[0].role == "user" and not entries[0].calls:
        return entries[0].text
    if conv.style == "chat":
        return ("".join(_chat_parts(entries, unicode)) + "Assistant: ").strip()
    evidence = _Evidence(pages or {}, _web_refs(entries), settings)
    body = "".join(_responses_parts(entries, evidence, unicode)).strip()
    return (body + "\n\nAssistant:").strip()


def _chat_response(turn: Turn, unicode: bool) -> str:
    if not isinstance(turn, Message):
        return ""
    calls = "\n".join(_json_block("tool_call", {"name": c.name, "arguments": c.arguments}, unicode=unicode)
                      for c in turn.calls)
    if not calls:
        return turn.text
    return f"{turn.text}\n{calls}".strip() if turn.text else calls


def render_response(conv: Conversation, pages: Mapping[str, Page] | None = None,
                    settings: Settings | None = None) -> str:
    """The response: the answer the model gave, its tool calls included."""
    settings = settings or Settings()
    unicode = not settings.ascii_json
    if conv.style == "chat":
        return "\n".join(_chat_response(t, unicode) for t in conv.answer)
    evidence = _Evidence(pages or {}, _web_refs(conv.answer), settings)
    body = "".join(_responses_parts(conv.answer, evidence, unicode)).strip()
    return body.replace("Assistant:", "", 1).strip()


def render(conv: Conversation, pages: Mapping[str, Page] | None = None,
           settings: Settings | None = None) -> ScoringInput:
    """Both strings a scorer needs."""
    return ScoringInput(prompt=render_prompt(conv, pages, settings),
                        response=render_response(conv, pages, settings), conversation=conv)
