"""OpenTelemetry GenAI semantic conventions: a span's messages as a Responses API or Chat Completions call.

`gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages` and
`gen_ai.tool.definitions` (JSON text or structured values) become the request's `instructions`,
`input` and `tools` and the response's `output` (a Chat Completions call: `messages`, `tools` and
`choices`). Parts: `text`; `tool_call`, `tool_call_response` (its value in `response` or
`result`); `reasoning`; `server_tool_call` and `server_tool_call_response` (a built-in tool: the
provider's item where the instrumentation writes it so, see `genai_openai`; else a call of that name
and its result, with a warning); media as the content parts the API takes, rendered as the raw
record's (`blob`, `uri` inline, `file` by id or name), never as bytes; tools as the request gave them.

What each instrumentation leaves out is known from its scope; warnings say what its spans lack. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tlmscore._tables import json_cell
from tlmscore.stores.genai_openai import KEPT_GENAI_OPENAI, as_requested, output_format, provider_item, read_back

__all__ = ["GENAI_OPENAI", "LOGFIRE", "OFFICIAL", "TRACELOOP", "genai_call", "instrumentation"]

TRACELOOP, LOGFIRE, OFFICIAL, GENAI_OPENAI = "traceloop", "logfire", "openai-v2", "genai-openai"
_SCOPES = {"opentelemetry.instrumentation.openai.v1": TRACELOOP, "opentelemetry.instrumentation.openai": TRACELOOP,
           "logfire.openai": LOGFIRE, "opentelemetry.instrumentation.openai_v2": OFFICIAL,
           "opentelemetry.util.genai.handler": OFFICIAL, "opentelemetry.instrumentation.genai.openai": GENAI_OPENAI}
REDACTED = "__REDACTED__"
_CONTENT_PARTS = frozenset({"input_text", "output_text", "refusal", "input_image", "image_url", "input_file",
                            "input_audio", "audio"})
"""Content parts of the API an instrumentation may pass on as they are; they render as in a raw record."""
_PARSED_ARGS = "arguments"
STRICT_LOST = "the span keeps function tools without their `strict` flag: each is shown as strict"
_NUMBERED = re.compile(r"(?<!\[)\[\d{1,4}\](?![\](])|\u3010\d{1,4}\u3011")
NUMBERED_LOST = ("the answer numbers its sources ([n]), and the span does not hold them: a provider's citations and "
                 "search results are not in the trace")
KEPT_ONLY = ("the span keeps only the messages and function calls of the call: built-in tool calls and results, "
             "citations, other items and a structured output's format, if the call had any, are not in the trace "
             "(--hydrate reads the stored response)")
PROGRAM_CALLS = ("the span holds calls of tools only a program may call, and not which program made them: "
                 "they are shown as the model's own calls")
NO_TOOLS = "the span holds tool calls but no tool definitions: the tools the request offered are not in the trace"
FC_IDS = ("the answer's function calls are named by their item ids (fc_…) in the span, not their call ids: "
          "the call_id shown is the item id")


def instrumentation(scope: str | None) -> str | None:
    """The instrumentation that wrote a span, by its instrumentation scope's name (None: another)."""
    return _SCOPES.get(scope or "")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)  # keys in their order


def _data_url(content: str, mime: Any) -> str:
    return content if content.startswith("data:") else f"data:{mime or ''};base64,{content}"


def _is_image(part: Mapping[str, Any]) -> bool:
    return part.get("modality") == "image" or str(part.get("mime_type") or "").startswith("image/")


def _uri(part: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    uri = str(part.get("uri") or "")
    if uri == REDACTED:
        return {"type": "input_text", "text": f"[{part.get('modality') or 'media'}: redacted]"}, \
            "the instrumentation redacted a media part: it is shown as redacted"
    if _is_image(part):
        return {"type": "input_image", "image_url": uri}, None
    return {"type": "input_file", "file_data" if uri.startswith("data:") else "file_url": uri}, None


def _blob(part: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    content = str(part.get("content") or "")
    if _is_image(part):
        return {"type": "input_image", "image_url": _data_url(content, part.get("mime_type"))}, None
    if part.get("modality") == "audio":
        return {"type": "input_audio", "input_audio": {"data": content, "format": part.get("mime_type")}}, None
    return {"type": "input_file", "file_data": _data_url(content, part.get("mime_type"))}, \
        "a file sent inline is in the span without its file name"


def _file(part: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    found = {k: part[k] for k in ("file_id", "filename") if part.get(k)}
    if _is_image(part):
        return {"type": "input_image", **found}, None
    lost = None if part.get("file_id") else \
        f"file {part.get('filename')!r} was sent inline: the span keeps its name, not its content"
    return {"type": "input_file", **found}, lost


_MEDIA = {"uri": _uri, "blob": _blob, "file": _file}
"""A `uri`, `blob` or `file` part → the API's content part, and what the span lost of it (None: nothing)."""


class _Items:
    """Messages, calls and results built from parts, and the warnings they call for."""

    def __init__(self, output: bool, items: bool = False) -> None:
        self.output, self.items = output, items  # items: built-in tool parts hold the provider's items
        self.entries: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self._parts: list[dict[str, Any]] = []

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def flush(self, role: str) -> None:
        if self._parts:
            self.entries.append({"kind": "message", "role": role, "parts": self._parts})
            self._parts = []

    def part(self, part: Mapping[str, Any], role: str) -> None:
        kind = part.get("type")
        text_type = "output_text" if self.output else "input_text"
        if kind == "text":
            self._parts.append({"type": text_type, "text": str(part.get("content") or "")})
        elif kind in _MEDIA:
            media, lost = _MEDIA[str(kind)](part)
            self._parts.append(media)
            if lost:
                self.warn(lost)
        elif kind in _CONTENT_PARTS:
            self._parts.append(dict(part))
        elif isinstance(part.get("content"), Mapping) and part["content"].get("type") in _CONTENT_PARTS:
            self._parts.append(dict(part["content"]))  # a generic part wrapping the API's content part
        elif kind in ("tool_call", "server_tool_call", "tool_call_response", "server_tool_call_response",
                      "reasoning"):
            self.flush(role)
            item = provider_item(part) if self.items else None
            if item is None:
                self._step(part, str(kind))
            else:
                self.entries.append({"kind": "item", "item": item})
        else:
            self._parts.append({"type": text_type, "text": _text(dict(part))})
            self.warn(f"message part of type {kind!r} is shown as its JSON")

    def _step(self, part: Mapping[str, Any], kind: str) -> None:
        call_id = str(part.get("id") or f"call_{len(self.entries)}")
        if kind in ("tool_call", "server_tool_call"):
            arguments = part.get(_PARSED_ARGS) if kind == "tool_call" else part.get("server_tool_call")
            self.entries.append({"kind": "call", "id": call_id, "name": str(part.get("name") or "tool"),
                                 "arguments": arguments if arguments is not None else {}})
            if kind == "server_tool_call":
                self.warn(f"built-in tool {part.get('name')!r} is shown as a function call: "
                          "its sources are not fetched as evidence")
        elif kind == "reasoning":
            self.entries.append({"kind": "reasoning", "summary": _summary(part.get("content"))})
        else:
            result = next((part[k] for k in ("response", "result", "server_tool_call_response") if k in part), None)
            output = result if isinstance(result, list) else _text(result if result is not None else "")
            self.entries.append({"kind": "result", "id": call_id, "output": output})  # content parts stay parts


def _summary(content: Any) -> list[str]:
    """A reasoning part's summary texts: its text, or the summary parts an instrumentation wrote as JSON."""
    value = json_cell(content) if isinstance(content, str) and content[:1] in "[{" else content
    if isinstance(value, list):
        return [str(p.get("text") or "") for p in value if isinstance(p, Mapping)]
    return [str(value or "")]


def message_entries(messages: Any, *, output: bool, items: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """The messages, calls, results, reasoning (and with `items`, built-in items) of GenAI messages, and warnings."""
    built = _Items(output, items)
    for message in json_cell(messages) or []:
        if not isinstance(message, Mapping):
            raise TypeError(f"a GenAI message must be an object, not {type(message).__name__}")
        role = str(message.get("role") or "user")
        for part in message.get("parts") or []:
            if isinstance(part, Mapping):
                built.part(part, role)
        built.flush(role)
    return built.entries, built.warnings


def matched_in_order(inputs: list[dict[str, Any]]) -> str | None:
    """Calls and results named by ids of different kinds (`fc_…`, `call_…`) matched in order, when their counts agree.

    Traceloop names a replayed call by its item id, while the result names the call id. The calls
    take their results' ids (so the prompt shows the call ids), and the warning says so.
    """
    calls = [e for e in inputs if e["kind"] == "call"]
    results = [e for e in inputs if e["kind"] == "result"]
    called = {e["id"] for e in calls}
    if not calls or all(e["id"] in called for e in results):
        return None
    kinds = {str(e["id"]).split("_", 1)[0] for e in calls}, {str(e["id"]).split("_", 1)[0] for e in results}
    if len(calls) != len(results) or kinds[0] & kinds[1]:
        return None
    for call, result in zip(calls, results, strict=True):
        call["id"] = result["id"]
    return (f"the span names function calls by {'/'.join(sorted(kinds[0]))}_… ids and their results by "
            f"{'/'.join(sorted(kinds[1]))}_… ids: matched in order")


def instructions_text(value: Any) -> str | None:
    """`gen_ai.system_instructions` as text (its text parts joined by newlines, as a raw record's are)."""
    parts = json_cell(value)
    if parts is None:
        return None
    if isinstance(parts, str):
        return parts
    return "\n".join(str(p.get("content") or "") for p in parts if isinstance(p, Mapping) and p.get("type") == "text")


def responses_tools(value: Any) -> list[dict[str, Any]]:
    """Tool definitions as the Responses API takes them: built-in tools and `strict` kept as given."""
    return [{"type": "function", **dict(tool["function"])} if isinstance(tool.get("function"), Mapping)  # Chat's shape
            else {"type": tool.get("type") or "function", **{k: v for k, v in tool.items() if k != "type"}}
            for tool in json_cell(value) or [] if isinstance(tool, Mapping)]


def chat_tools(value: Any) -> list[dict[str, Any]]:
    """Tool definitions in the Chat Completions shape (built-in tools as they are)."""
    return [{"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}
            if tool.get("type") == "function" else tool for tool in responses_tools(value)]


def finish_reason(attributes: Mapping[str, Any], messages: Any) -> str | None:
    """The call's finish reason: `gen_ai.response.finish_reasons`, else the first output message's."""
    reasons = json_cell(attributes.get("gen_ai.response.finish_reasons"))
    if isinstance(reasons, list) and reasons:
        return str(reasons[0])
    first = next((m for m in json_cell(messages) or [] if isinstance(m, Mapping)), {})
    return str(first["finish_reason"]) if first.get("finish_reason") else None


def _responses_item(entry: dict[str, Any], number: int, output: bool) -> dict[str, Any]:
    kind = entry["kind"]
    if kind == "message" and output:
        parts = [{**p, "annotations": []} if p.get("type") == "output_text" else p for p in entry["parts"]]
        return {"type": "message", "role": "assistant", "status": "completed", "content": parts}
    if kind == "message":
        return {"role": entry["role"], "content": entry["parts"]}
    if kind == "call":
        named = {"namespace": entry["namespace"]} if "namespace" in entry else {}
        return {"type": "function_call", "call_id": entry["id"], "name": entry["name"],
                "arguments": _text(entry["arguments"]), **named}
    if kind == "item":
        return dict(entry["item"])
    if kind == "result":
        return {"type": "function_call_output", "call_id": entry["id"], "output": entry["output"]}
    return {"type": "reasoning", "id": f"rs_{number}",
            "summary": [{"type": "summary_text", "text": text} for text in entry["summary"]]}


def _chat_content(parts: list[dict[str, Any]]) -> Any:
    """Chat message content: one text part as its text (as the API logs it), several parts as a list."""
    if len(parts) == 1 and parts[0].get("type") in ("input_text", "output_text"):
        return parts[0]["text"]
    return parts


def _chat_messages(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages: a call joins the assistant message before it, a result is a tool message."""
    messages: list[dict[str, Any]] = []
    for entry in entries:
        if entry["kind"] == "message":
            messages.append({"role": entry["role"], "content": _chat_content(entry["parts"])})
        elif entry["kind"] == "call":
            if not messages or messages[-1]["role"] != "assistant":
                messages.append({"role": "assistant", "content": None})
            messages[-1].setdefault("tool_calls", []).append(
                {"id": entry["id"], "type": "function",
                 "function": {"name": entry["name"], "arguments": _text(entry["arguments"])}})
        elif entry["kind"] == "result":
            messages.append({"role": "tool", "tool_call_id": entry["id"], "content": entry["output"]})
    return messages


def responses_call(attributes: Mapping[str, Any], inputs: list[dict[str, Any]],
                   outputs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(request, response) of a Responses API call."""
    model = attributes.get("gen_ai.request.model")
    request: dict[str, Any] = {"model": model,
                               "input": [_responses_item(e, i, False) for i, e in enumerate(inputs)]}
    instructions = instructions_text(attributes.get("gen_ai.system_instructions"))
    if instructions is not None:
        request["instructions"] = instructions
    tools = responses_tools(attributes.get("gen_ai.tool.definitions"))
    if tools:
        request["tools"] = tools
    request.update(output_format(attributes))
    finish = finish_reason(attributes, attributes.get("gen_ai.output.messages"))
    incomplete = finish in ("length", "max_tokens")
    response = {"id": attributes.get("gen_ai.response.id"), "object": "response",
                "model": attributes.get("gen_ai.response.model") or model,
                "output": [_responses_item(e, i, True) for i, e in enumerate(outputs)],
                "status": "incomplete" if incomplete else "completed",
                "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None}
    return request, response


def chat_call(attributes: Mapping[str, Any], inputs: list[dict[str, Any]],
              outputs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(request, response) of a Chat Completions call: each output message is a choice."""
    model = attributes.get("gen_ai.request.model")
    instructions = instructions_text(attributes.get("gen_ai.system_instructions"))
    system = [{"role": "system", "content": instructions}] if instructions is not None else []
    request: dict[str, Any] = {"model": model, "messages": [*system, *_chat_messages(inputs)]}
    tools = chat_tools(attributes.get("gen_ai.tool.definitions"))
    if tools:
        request["tools"] = tools
    finish = finish_reason(attributes, attributes.get("gen_ai.output.messages")) or "stop"
    answers = [m for m in _chat_messages(outputs) if m["role"] == "assistant"] or \
        [{"role": "assistant", "content": None}]
    choices = [{"index": i, "message": m, "finish_reason": finish} for i, m in enumerate(answers)]
    response = {"id": attributes.get("gen_ai.response.id"), "object": "chat.completion",
                "model": attributes.get("gen_ai.response.model") or model, "choices": choices}
    return request, response


_CHAT_SPANS = ("openai.chat", "Chat Completion")
_RESPONSES_SPANS = ("openai.response", "Responses API")


def is_chat(attributes: Mapping[str, Any], span_name: str | None, who: str | None) -> bool:
    """Whether a span is a Chat Completions call (else a Responses call, which the convention's messages fit)."""
    rid = str(attributes.get("gen_ai.response.id") or "")
    name = span_name or ""
    if rid.startswith("resp_") or name.startswith(_RESPONSES_SPANS) or attributes.get("openai.api.type") == "responses":
        return False
    return name.startswith(_CHAT_SPANS) or rid.startswith("chatcmpl") or who == OFFICIAL


def _built_in_lost(who: str | None, tools: list[dict[str, Any]], outputs: list[dict[str, Any]],
                   finish: str | None) -> str | None:
    """What a span says of built-in tools whose calls it does not hold (Traceloop and logfire keep none)."""
    if who not in (TRACELOOP, LOGFIRE):
        return None
    offered = sorted({str(t.get("type")) for t in tools if t.get("type") not in ("function", "custom")})
    if offered:
        return (f"the request offered built-in tools ({', '.join(offered)}): the span keeps none of their calls or "
                "results, so whether they ran and what they found is not in the trace")
    if finish == "tool_call" and not any(e["kind"] == "call" for e in outputs):
        return ("a built-in tool ran (the span's finish reason is tool_call and it holds no function call): "
                "its calls and results are not in the trace")
    return None


def genai_call(attributes: Mapping[str, Any], scope: str | None = None,
               span_name: str | None = None) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(request, response, warnings) of a GenAI span's attributes, written by the instrumentation `scope` names."""
    who = instrumentation(scope)
    inputs, warned_in = message_entries(attributes.get("gen_ai.input.messages"), output=False)
    outputs, warned_out = message_entries(attributes.get("gen_ai.output.messages"), output=True,
                                          items=who == GENAI_OPENAI)
    warnings = [*warned_in, *warned_out]
    matched = matched_in_order(inputs)
    if matched:
        warnings.append(matched)
    chat = is_chat(attributes, span_name, who)
    tools = responses_tools(attributes.get("gen_ai.tool.definitions"))
    if who == TRACELOOP and not chat:
        outputs.sort(key=lambda e: e["kind"] != "reasoning")  # it writes reasoning last; the API gives it first
        if any(t.get("type") == "function" and "strict" not in t for t in tools):
            warnings.append(STRICT_LOST)
        if any(e["kind"] == "call" and str(e["id"]).startswith("fc_") for e in outputs):
            warnings.append(FC_IDS)
    lost = _built_in_lost(who, tools, outputs, finish_reason(attributes, attributes.get("gen_ai.output.messages")))
    if lost:
        warnings.append(lost)
    if not tools and any(e["kind"] == "call" for e in (*inputs, *outputs)):
        warnings.append(NO_TOOLS)
    warnings.extend(read_back(attributes, inputs, outputs, tools) if who == GENAI_OPENAI else [])
    programs_only = {t.get("name") for t in tools if isinstance(t.get("allowed_callers"), list)
                     and "direct" not in t["allowed_callers"]}
    if any(e["kind"] == "call" and e["name"] in programs_only for e in (*inputs, *outputs)):
        warnings.append(PROGRAM_CALLS)
    answers = sum(1 for e in outputs if e["kind"] == "message")
    if answers > 1 and not chat:  # Responses' `phase` (commentary or final answer) has no place in the convention
        warnings.append(f"the output holds {answers} assistant messages and not which were commentary: "
                        "all are read as the answer")
    if chat and any(_NUMBERED.search(str(p.get("text") or "")) for e in outputs if e["kind"] == "message"
                    for p in e["parts"]):
        warnings.append(NUMBERED_LOST)
    if who in (TRACELOOP, LOGFIRE, GENAI_OPENAI) and not chat and not warnings:  # the span does not tell what
        warnings.append(KEPT_ONLY if who != GENAI_OPENAI else KEPT_GENAI_OPENAI)  # it dropped: say what it may have
    request, response = (chat_call if chat else responses_call)(attributes, inputs, outputs)
    return as_requested(request) if who == GENAI_OPENAI else request, response, list(dict.fromkeys(warnings))
