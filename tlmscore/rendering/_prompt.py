"""Render: a conversation and its pages become the prompt and response strings, in the TLM format.

Pure: the same conversation, pages and settings give the same bytes in every process. Where the
reference formatter (cleanlab-tlm 1.1.39) is right this matches it byte for byte; web evidence is
rendered in a stable order, keeps Unicode, and says plainly when a page could not be retrieved.
`render` also hands scorers the evidence it showed as `Evidence` values (`tlmscore.rendering._shown`).
Every JSON block keeps Unicode too, unless `Settings.ascii_json` asks for the reference's escaping.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

from tlmscore.evidence.page import PagesByKey
from tlmscore.model import Conversation, Evidence, Message, ScoringInput, ToolCall, ToolResult, Turn, WebRef, WebResult
from tlmscore.rendering._shown import UNLOGGED_NOTE, PageShelf, cite_spans, tool_evidence
from tlmscore.settings import Settings

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


def _web_block(turn: WebResult, shelf: PageShelf, previous: str | None) -> list[str]:
    """A web tool's response, or the pages the answer cites that no logged result holds."""
    if turn.unlogged:
        output = [shelf.entry(ref, turn.focus, turn) for ref in turn.refs]
        note = turn.note or UNLOGGED_NOTE
        return [_prefix("system", previous), _text_block(turn.name, {"note": note, "pages": output})]
    body: dict[str, Any] = {"name": turn.name, "call_id": turn.call_id}
    body["output"] = shelf.failed(turn) if turn.status == "failed" else \
        [shelf.entry(ref, turn.focus, turn) for ref in turn.refs]
    return ["Tool: " if previous != "tool" else "", _text_block("tool_response", body)]


def _responses_parts(entries: Sequence[Turn], evidence: PageShelf, unicode: bool) -> list[str]:
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
        elif isinstance(turn, WebResult):
            parts.extend(_web_block(turn, evidence, previous))
            previous = "system" if turn.unlogged else "tool"
        else:
            if previous != "tool":
                parts.append("Tool: ")
            evidence.shown.extend(tool_evidence(turn))
            body = {"name": turn.name, "call_id": turn.call_id, "output": turn.output}
            parts.append(_json_block("tool_response", body, unicode=unicode))
            previous = "tool"
        parts.append("\n\n")
    return parts


def _chat_parts(entries: Sequence[Turn], shown: list[Evidence], unicode: bool) -> list[str]:
    """The Chat Completions-format body, following the reference's rules for that format."""
    parts: list[str] = []
    previous: str | None = None
    for turn in entries:
        if isinstance(turn, ToolResult):
            shown.extend(tool_evidence(turn))
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
        leading = next((i for i, t in enumerate(entries) if not (isinstance(t, Message) and t.role in SYSTEM_ROLES)),
                       len(entries))
        entries.insert(leading, Message(role="system", text=tools_section(conv.tools, unicode=unicode)))
    if conv.instructions is not None and conv.style == "responses":
        entries.insert(0, Message(role="system", text=conv.instructions))
    return entries


def _web_refs(turns: Sequence[Turn]) -> list[tuple[WebRef, tuple[str, ...]]]:
    return [(ref, t.focus) for t in turns if isinstance(t, WebResult) for ref in t.refs]


def _prompt(conv: Conversation, pages: PagesByKey | None,
            settings: Settings | None) -> tuple[str, list[Evidence]]:
    """The prompt, and the evidence it shows as values, in prompt order."""
    settings = settings or Settings()
    unicode = not settings.ascii_json
    entries = _entries(conv, unicode)
    if len(entries) == 1 and isinstance(entries[0], Message) and entries[0].role == "user" and not entries[0].calls:
        return entries[0].text, []
    if conv.style == "chat":
        shown: list[Evidence] = []
        return ("".join(_chat_parts(entries, shown, unicode)) + "Assistant: ").strip(), shown
    shelf = PageShelf(pages or {}, _web_refs(entries), settings)
    body = "".join(_responses_parts(entries, shelf, unicode)).strip()
    return (body + "\n\nAssistant:").strip(), shelf.shown


def render_prompt(conv: Conversation, pages: PagesByKey | None = None,
                  settings: Settings | None = None) -> str:
    """The prompt: everything the model saw before it answered, ending with `Assistant:`."""
    return _prompt(conv, pages, settings)[0]


def _chat_response(turn: Turn, unicode: bool) -> str:
    if not isinstance(turn, Message):
        return ""
    calls = "\n".join(_json_block("tool_call", {"name": c.name, "arguments": c.arguments}, unicode=unicode)
                      for c in turn.calls)
    if not calls:
        return turn.text
    return f"{turn.text}\n{calls}".strip() if turn.text else calls


def render_response(conv: Conversation, pages: PagesByKey | None = None,
                    settings: Settings | None = None) -> str:
    """The response: the answer the model gave, its tool calls included."""
    settings = settings or Settings()
    unicode = not settings.ascii_json
    if conv.style == "chat":
        return "\n".join(_chat_response(t, unicode) for t in conv.answer)
    shelf = PageShelf(pages or {}, _web_refs(conv.answer), settings)
    body = "".join(_responses_parts(conv.answer, shelf, unicode)).strip()
    return body.replace("Assistant:", "", 1).strip()


def render(conv: Conversation, pages: PagesByKey | None = None,
           settings: Settings | None = None) -> ScoringInput:
    """Both strings a scorer needs, and the evidence the prompt shows as values.

    `pages` are keyed by the `url_key` of their URL (as the pipeline's plan keys them); a cited
    URL without one is shown as a page that could not be retrieved.
    Each `Evidence` is a page entry, a file search result or another tool's response, in prompt
    order, with the spans of the rendered response that cite it.
    """
    prompt, shown = _prompt(conv, pages, settings)
    response = render_response(conv, pages, settings)
    return ScoringInput(prompt=prompt, response=response, conversation=conv,
                        evidence=cite_spans(shown, conv.turns, response))
