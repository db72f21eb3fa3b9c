"""The walk over a transcript's items: request, history and output become a `Conversation` (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from tlmscore._content import content_text
from tlmscore.convert._functions import parse_arguments
from tlmscore.convert._generic import convert_unknown
from tlmscore.convert._instructions import call_instructions
from tlmscore.convert._messages import message_text
from tlmscore.convert._providers import chat_items, chat_search_items, chat_tools_as_responses, is_search_chat
from tlmscore.convert._structured import apply_structured_output, json_schema_format
from tlmscore.convert._tools import declare_chat_tool, declare_tools
from tlmscore.convert._web import linked_pages
from tlmscore.convert._xai import server_items
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.convert.registry import converters as installed_converters
from tlmscore.convert.registry import item_type
from tlmscore.errors import TranscriptError
from tlmscore.model import Conversation, FileResult, Message, ToolCall, ToolResult, Transcript, Turn
from tlmscore.settings import Settings

NO_INPUT = "the request's input is empty: the prompt shows nothing the model was asked"
TEXT_ONLY_ORIGINS = frozenset({"otlp"})
"""Sources whose records may keep an answer's text without the search items and citations behind it
(OpenTelemetry GenAI spans): the pages such an answer links are shown apart (`linked_pages`)."""
NO_REQUEST = ("the record has no request (a bare response): what the model was asked is not in the log, "
              "so the prompt holds only what the response itself carries")


def input_items(value: Any) -> list[dict[str, Any]]:
    """The request's `input`: a string is one user message; a list is taken item by item."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list):
        bad = [i for i, item in enumerate(value) if not isinstance(item, dict)]
        if bad:
            raise TranscriptError(f"request.input[{bad[0]}] is not an object")
        return list(value)
    raise TranscriptError(f"request.input must be a string or a list, not {type(value).__name__}")


def split_answer(output: Sequence[dict[str, Any]], converters: Mapping[str, ItemConverter] | None = None) -> int:
    """Where the answer starts: the trailing run of answer items (messages, client-side calls).

    Reasoning inside the run is skipped over; the run stops at the first item that is context.
    """
    table = converters if converters is not None else installed_converters()
    start = fallback = len(output)
    for i in range(len(output) - 1, -1, -1):
        spec = table.get(item_type(output[i]))
        kind = spec.kind_of(output[i]) if spec is not None else "context"
        if kind == "context":
            break
        if kind == "answer":
            start = i
        elif spec is not None and spec.kind == "answer":  # e.g. a call a program made: part of its run
            fallback = i
    if start == len(output):  # nothing the model said itself: what its program did is what it answered
        start = fallback
    return _after_commentary(output, start)


def _after_commentary(output: Sequence[dict[str, Any]], start: int) -> int:
    """The answer's start moved past `phase: "commentary"` messages that come before a final answer.

    Commentary ("I'll check the sources…") is what the user saw while the model worked, not the
    answer: when the run also holds a `final_answer` message, the answer starts there.
    """
    finals = [i for i in range(start, len(output)) if output[i].get("phase") == "final_answer"
              and item_type(output[i]) == "message"]
    if finals and any(output[i].get("phase") == "commentary" for i in range(start, finals[0])):
        return finals[0]
    return start


def _instructions(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return "\n".join(content_text(item.get("content")) for item in value if isinstance(item, dict))
    return str(value)


def convert_items(
    items: Sequence[dict[str, Any]],
    *,
    answer_start: int | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    instructions: Any = None,
    settings: Settings | None = None,
    converters: Mapping[str, ItemConverter] | None = None,
) -> Conversation:
    """Responses API items (history, then output) as a conversation.

    Items from `answer_start` on form the answer; the rest is what the model saw. `converters`
    (see `tlmscore.convert.registry.converters`) defaults to the built-in and installed ones.
    """
    settings = settings or Settings()
    table = converters if converters is not None else installed_converters()
    ctx = Context(items=items, urls=settings.urls, reasoning=settings.reasoning, think=settings.think)
    start = len(items) if answer_start is None else answer_start
    turns: list[Turn] = []
    answer: list[Turn] = []
    for i, item in enumerate(items):
        ctx.index = i
        spec = table.get(item_type(item))
        produced = spec.convert(item, ctx) if spec is not None else convert_unknown(item, ctx)
        (answer if i >= start else turns).extend(produced)
    declared = tuple(declare_tools(tools or [], ctx.used_tools))
    return Conversation(
        turns=tuple(turns),
        answer=tuple(answer),
        tools=declared,
        has_tools=bool(tools) or bool(declared),
        instructions=_instructions(instructions),
        warnings=tuple(ctx.warnings),
    )


def _chat_message(msg: dict[str, Any], names: dict[str, str], ctx: Context) -> Turn:
    role = str(msg.get("role") or "user")
    if role == "tool":
        call_id = str(msg.get("tool_call_id") or "")
        return ToolResult(name=names.get(call_id, "function"), call_id=call_id, output=msg.get("content"))
    calls: list[ToolCall] = []
    for call in msg.get("tool_calls") or []:
        if not isinstance(call, dict) or call.get("type", "function") != "function":
            continue
        function = call.get("function") or {}
        name = str(function.get("name") or "function")
        call_id = str(call.get("id") or "")
        names[call_id] = name
        calls.append(ToolCall(name=name, arguments=parse_arguments(function.get("arguments"), ctx, name),
                              call_id=call_id))
    label = msg.get("name")
    return Message(role=role, text=message_text(msg, role, ctx),
                   name=label if isinstance(label, str) and label else None, calls=tuple(calls))


def convert_chat(
    messages: Sequence[dict[str, Any]],
    *,
    answer: dict[str, Any] | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    settings: Settings | None = None,
) -> Conversation:
    """Chat Completions messages (and the answering message) to a chat-style conversation."""
    names: dict[str, str] = {}
    ctx = Context(items=(), think=(settings or Settings()).think)
    turns = [_chat_message(m, names, ctx) for m in messages]
    for number, turn in enumerate(turns, start=1):
        if isinstance(turn, Message) and turn.role != "assistant" and not turn.text.strip() and not turn.calls:
            ctx.warn(f"message {number} ({turn.role}) has no content: the prompt shows nothing of it")
    answer_turns = (_chat_message(answer, names, ctx),) if answer is not None else ()
    return Conversation(
        turns=tuple(turns),
        answer=answer_turns,
        tools=tuple(declare_chat_tool(t) for t in tools or []),
        has_tools=bool(tools),
        style="chat",
        warnings=tuple(ctx.warnings),
    )


def cited_files(conv: Conversation) -> list[str]:
    """The files the answer cites among its file search results, by file name (else file id), each once in order."""
    names: dict[str, None] = {}
    for turn in (t for t in conv.turns if isinstance(t, FileResult)):
        results = [r for r in turn.output if isinstance(r, dict)] if isinstance(turn.output, list) else []
        for file_id, _ in turn.cited:
            found = next((r.get("filename") for r in results if r.get("file_id") == file_id), None)
            names[str(found or file_id)] = None
    return list(names)


def convert_transcript(transcript: Transcript, settings: Settings | None = None, *,
                       converters: Mapping[str, ItemConverter] | None = None) -> Conversation:
    """A whole transcript: request history plus the response's output, answer split off.

    A search-augmented chat answer (with `search_results`, `citations` or `url_citation`
    annotations) is rendered in the Responses format, which has a place for its search; other chat
    records keep the chat format.
    """
    request, response = transcript.request, transcript.response
    conv = _convert_call(transcript, request, response, settings, converters)
    if transcript.origin in TEXT_ONLY_ORIGINS and (transcript.fmt == "responses" or _links(response)):
        output = response.get("output") or [i for i in chat_items([], response)[0] if i.get("type") == "message"]
        linked, said = linked_pages(output, conv.turns, (settings or Settings()).urls)
        conv = replace(conv, turns=(*conv.turns, *linked), warnings=(*conv.warnings, *((said,) if said else ())))
    if not request:
        conv = replace(conv, warnings=(*conv.warnings, NO_REQUEST))
    elif transcript.fmt == "responses" and not _asks_anything(conv):
        conv = replace(conv, warnings=(*conv.warnings, NO_INPUT))
    return conv


def _asks_anything(conv: Conversation) -> bool:
    """Whether the prompt shows the model anything: instructions, tools, or a turn with content."""
    return bool(conv.instructions or conv.tools) or any(
        not isinstance(t, Message) or t.text.strip() or t.calls for t in conv.turns)


def _links(response: dict[str, Any]) -> bool:
    """Whether a chat answer that logs no search cites pages by markdown links alone."""
    if is_search_chat(response):
        return False
    return bool(linked_pages(chat_items([], response)[0], (), "cited")[0])


def _convert_call(transcript: Transcript, request: dict[str, Any], response: dict[str, Any],
                  settings: Settings | None, converters: Mapping[str, ItemConverter] | None) -> Conversation:
    searched = transcript.fmt == "chat" and is_search_chat(response)
    if searched or (transcript.fmt == "chat" and transcript.origin in TEXT_ONLY_ORIGINS and _links(response)):
        as_items = chat_search_items if searched else chat_items  # else a trace's answer that kept only links
        items, start = as_items(request.get("messages") or [], response)
        return convert_items(items, answer_start=start, tools=chat_tools_as_responses(request.get("tools")),
                             settings=settings)
    if transcript.fmt == "chat":
        choices = response.get("choices") or [{}]
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        return convert_chat(request.get("messages") or [], answer=message or {"role": "assistant", "content": ""},
                            tools=request.get("tools"), settings=settings)
    output = response.get("output")
    if not isinstance(output, list) or not all(isinstance(o, dict) for o in output):
        raise TranscriptError("response.output must be a list of objects")
    tools = request.get("tools") if request.get("tools") is not None else response.get("tools")
    history = server_items(input_items(request.get("input")), tools)
    output = server_items(output, tools)
    instructions = call_instructions(request, response)
    history = [*instructions.items, *history]
    conv = convert_items(history + output, answer_start=len(history) + split_answer(output, converters),
                         tools=tools, instructions=instructions.text, settings=settings, converters=converters)
    if instructions.warnings:
        conv = replace(conv, warnings=(*instructions.warnings, *conv.warnings))
    return apply_structured_output(conv, json_schema_format(request, response, history), output)
