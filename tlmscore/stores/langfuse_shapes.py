"""What Langfuse's integrations store in a generation's input and output, as OpenAI's own shapes.

A generation observation holds whatever the integration that made it logged. Besides Langfuse's own
OpenAI integration (read in `tlmscore.stores.langfuse`), the integrations of agent frameworks on
OpenAI models log (after Langfuse's ChatML adapters, which say how its UI reads each):

- a whole `Response` as the output (OpenInference's OpenAI Agents instrumentation), its `instructions`
  and `tools` only there; Responses items without their `type` (several integrations drop it: the
  type is read from the item's shape, `item_type`); tool call arguments as objects, not JSON text;
- LangChain / LangGraph messages: `type` (`human`, `ai`, `system`, `tool`) in place of `role`, tool calls
  in `additional_kwargs.tool_calls` or as `{name, args, id}`, the tools declared as extra `tool`
  messages whose content is a function definition, tool results as objects or lists;
- messages of `parts` (OpenTelemetry GenAI conventions: pydantic-ai, Microsoft Agent Framework):
  `text`, `tool_call` and `tool_call_response` parts, system instructions apart
  (`gen_ai.system_instructions`), tools in the span's attributes;
- AI SDK messages: `tool-call` and `tool-result` content parts, a bare list of tool calls as the
  output, tools in the metadata (`inputSchema`).

`chat_messages` turns any of the message shapes into Chat Completions messages (tool definitions
found among them returned apart), `typed_items` gives Responses items their type, and
`declared_tools` and `instructions_of` find what a framework keeps beside the messages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "chat_messages",
    "chat_tools",
    "declared_tools",
    "instructions_of",
    "is_response",
    "is_responses_items",
    "item_type",
    "typed_items",
]

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool",
          "developer": "developer", "user": "user", "assistant": "assistant", "model": "assistant",
          "chat": "user", "generic": "user"}
_ITEM_SHAPES: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"call_id", "name", "arguments"}), "function_call"),
    (frozenset({"call_id", "output"}), "function_call_output"),
    (frozenset({"summary"}), "reasoning"),
    (frozenset({"encrypted_content"}), "reasoning"),
    (frozenset({"queries", "results"}), "file_search_call"),
    (frozenset({"queries"}), "file_search_call"),
    (frozenset({"code", "container_id"}), "code_interpreter_call"),
    (frozenset({"server_label", "tools"}), "mcp_list_tools"),
    (frozenset({"server_label", "name", "arguments"}), "mcp_call"),
    (frozenset({"call_id", "input", "name"}), "custom_tool_call"),
    (frozenset({"action"}), "web_search_call"),
    (frozenset({"role", "content"}), "message"),
)
"""Keys a Responses item of each type always holds, most specific first (the API reference's item objects)."""
_CALL_PARTS = frozenset({"tool_call", "tool-call", "function_call", "tool_use"})
_RESULT_PARTS = frozenset({"tool_call_response", "tool-result", "function_call_output", "function_result",
                           "tool_result"})
_FRAMEWORK_PARTS = _CALL_PARTS | _RESULT_PARTS
_CALL_TYPES = frozenset({"function_call", "custom_tool_call"})


def _text(value: Any, compact: bool = True) -> str:
    """A value as text: text as it is, anything else as JSON.

    Compact, as the API writes arguments; else spaced, as Python's `json.dumps` writes a tool's result.
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":") if compact else None)


def item_type(item: Mapping[str, Any]) -> str | None:
    """A Responses item's type: its own, else the type whose keys it holds (None when no shape fits)."""
    given = item.get("type")
    if isinstance(given, str) and given:
        return given
    keys = {k for k, v in item.items() if v is not None}
    return next((kind for needed, kind in _ITEM_SHAPES if needed <= keys), None)


def _part(part: Any, role: Any) -> Any:
    """A content part with its type: text parts of the assistant are `output_text`, others `input_text`."""
    if not isinstance(part, Mapping) or part.get("type") or not isinstance(part.get("text"), str):
        return part
    return {"type": "output_text" if role == "assistant" else "input_text", **part}


def typed_items(items: Sequence[Any]) -> list[Any]:
    """Responses items, each with its type (read from its shape) and tool call arguments as JSON text."""
    out: list[Any] = []
    for item in items:
        if not isinstance(item, Mapping):
            out.append(item)
            continue
        kind = item_type(item)
        if kind == "message" and not isinstance(item.get("content"), list) and not item.get("id"):
            kind = None  # an easy input message (role and text) needs no type
        typed = dict(item) if kind is None else {"type": kind, **{k: v for k, v in item.items() if k != "type"}}
        if kind in _CALL_TYPES and "arguments" in typed and not isinstance(typed["arguments"], str):
            typed["arguments"] = _text(typed["arguments"])
        if isinstance(typed.get("content"), list):
            typed["content"] = [_part(p, typed.get("role")) for p in typed["content"]]
        out.append(typed)
    return out


def is_response(value: Any) -> bool:
    """A whole `Response` object (an `output` list beside the Response's own fields), not a bare item."""
    return (isinstance(value, Mapping) and isinstance(value.get("output"), list)
            and (value.get("object") == "response" or "status" in value or str(value.get("id", "")).startswith("resp")))


def is_responses_items(value: Any) -> bool:
    """Responses items (typed or not), not chat messages.

    Some item is no message (a call, a call's output, reasoning…) or is an output message.
    """
    items = value if isinstance(value, list) else [value] if isinstance(value, Mapping) else []
    for item in items:
        if not isinstance(item, Mapping) or "parts" in item:
            return False
        kind = item_type(item)
        if kind in _ROLES or kind in ("AIMessage", "AIMessageChunk"):  # a LangChain message's type
            return False
        if kind in (None, "message"):
            if item.get("type") or _output_message(item):
                return True
            continue
        return True
    return False


def _output_message(item: Mapping[str, Any]) -> bool:
    """A Responses output message without its type: a `msg_` id, a status, or parts with annotations."""
    content = item.get("content")
    parts = isinstance(content, list) and any(isinstance(p, Mapping) and (
        "annotations" in p or str(p.get("type", "")).startswith(("output_", "input_"))) for p in content)
    return parts or str(item.get("id", "")).startswith("msg_") or "status" in item


def _is_openai(message: Mapping[str, Any]) -> bool:
    """A Chat Completions message as the API takes it (kept as it is): no framework's fields or parts."""
    if message.get("role") not in ("system", "developer", "user", "assistant", "tool") or "parts" in message:
        return False
    if "additional_kwargs" in message or "toolCalls" in message or "blocks" in message:
        return False
    content = message.get("content")
    if message["role"] == "tool" and not isinstance(content, str):
        return False
    if isinstance(content, list) and any(isinstance(p, Mapping) and str(p.get("type")) in _FRAMEWORK_PARTS
                                         for p in content):
        return False
    if content is not None and not isinstance(content, (str, list)):
        return False
    calls = message.get("tool_calls") or []
    return all(isinstance(c, Mapping) and isinstance(c.get("function"), Mapping)
               and isinstance(c["function"].get("arguments"), str) for c in calls)


def _inner(value: Mapping[str, Any], key: str, default: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """`value[key]` when it is an object, else `default` (`value` itself when not given)."""
    found = value.get(key)
    if isinstance(found, Mapping):
        return found
    return value if default is None else default


def _call(call: Mapping[str, Any]) -> dict[str, Any] | None:
    """One tool call in any framework's shape as a Chat Completions tool call."""
    function = _inner(call, "function")
    name = function.get("name") or call.get("toolName")
    if not isinstance(name, str) or not name:
        return None
    args = next((function[k] for k in ("arguments", "args", "input") if function.get(k) is not None), None)
    if args is None:
        args = next((call[k] for k in ("args", "input") if call.get(k) is not None), {})
    ident = call.get("id") or call.get("call_id") or call.get("toolCallId") or ""
    if isinstance(ident, list):  # Microsoft Agent Framework: [run id, call id]
        ident = next((i for i in ident if str(i).startswith("call_")), ident[-1] if ident else "")
    return {"id": str(ident), "type": "function", "function": {"name": name, "arguments": _text(args)}}


def _calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool calls a message holds: `tool_calls`, `toolCalls`, LangChain's `additional_kwargs`."""
    extra = _inner(message, "additional_kwargs", {})
    found = message.get("tool_calls") or message.get("toolCalls") or extra.get("tool_calls") or []
    if not found and isinstance(extra.get("function_call"), Mapping):
        found = [extra["function_call"]]
    return [c for c in (_call(call) for call in found if isinstance(call, Mapping)) if c is not None]


def _definition(value: Any) -> dict[str, Any] | None:
    """A tool definition in any shape as a Chat Completions function tool (None when it is none)."""
    value = _parsed(value)
    if not isinstance(value, Mapping):
        return None
    if value.get("type") == "function" and isinstance(value.get("function"), Mapping):
        return dict(value)  # already a Chat Completions tool
    function = _inner(value, "function")
    name = function.get("name")
    if not isinstance(name, str) or (value.get("type") not in (None, "function") and "function" not in value):
        return None
    params = next((function[k] for k in ("parameters", "parameters_json_schema", "inputSchema", "input_schema")
                   if function.get(k) is not None), None)
    body: dict[str, Any] = {"name": name}
    if function.get("description"):
        body["description"] = function["description"]
    if params is not None:
        body["parameters"] = params
    return {"type": "function", "function": body}


def _parsed(value: Any) -> Any:
    """JSON text parsed (a framework may keep an object as text); anything else as it is."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _from_parts(role: str, parts: Sequence[Any]) -> list[dict[str, Any]]:
    """A message of GenAI `parts` (or AI SDK content parts): its text, tool calls, and tool results apart."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("content", part.get("text")), str):
            texts.append(part.get("content", part.get("text")))
        elif kind in _CALL_PARTS:
            call = _call(part)
            calls += [call] if call else []
        elif kind in _RESULT_PARTS:
            value = next((part[k] for k in ("result", "response", "output", "content") if k in part), "")
            if isinstance(value, Mapping) and value.get("type") in ("text", "json") and "value" in value:
                value = value["value"]
            ident = part.get("id") or part.get("toolCallId") or part.get("call_id") or part.get("tool_use_id") or ""
            if isinstance(ident, list):
                ident = next((i for i in ident if str(i).startswith("call_")), ident[-1] if ident else "")
            results.append({"role": "tool", "tool_call_id": str(ident), "content": _text(value, compact=False)})
    out: list[dict[str, Any]] = []
    if texts or calls or not results:
        message: dict[str, Any] = {"role": "assistant" if calls else role, "content": "".join(texts)}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out + results


def _content(message: Mapping[str, Any]) -> Any:
    """A message's content: `content`, else LlamaIndex's `blocks` (their text joined); a tool's text parts joined."""
    content = message.get("content")
    blocks = message.get("blocks")
    if content is None and isinstance(blocks, list):
        content = "".join(str(b.get("text") or "") for b in blocks if isinstance(b, Mapping)
                          and b.get("block_type", "text") == "text")
    role = str(message.get("role") or message.get("type") or "")
    if role == "tool" and isinstance(content, list) and content and all(
            isinstance(p, Mapping) and p.get("type") in ("text", "input_text") and isinstance(p.get("text"), str)
            for p in content):
        content = "\n".join(p["text"] for p in content)
    return content


def chat_messages(messages: Sequence[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Any framework's messages as Chat Completions messages, and the tool definitions logged among them."""
    out: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, str):
            out.append({"role": "user", "content": message})
            continue
        if not isinstance(message, Mapping):
            continue
        role = _ROLES.get(str(message.get("role") or message.get("type") or "user").lower(), "user")
        content = _content(message)
        definition = _definition(content) if role == "tool" and not message.get("tool_call_id") else None
        if definition is not None:  # LangChain's integration logs the declared tools as tool messages
            tools.append(definition)
            continue
        if _is_openai(message):
            out.append(dict(message) if content is message.get("content") else {**message, "content": content})
            continue
        if isinstance(message.get("parts"), list):
            out += _from_parts(role, message["parts"])
            continue
        if isinstance(content, list) and any(isinstance(p, Mapping) and p.get("type") in _FRAMEWORK_PARTS
                                             for p in content):
            out += _from_parts(role, content)
            continue
        text = content if content is not None else ""
        as_json = role == "tool" or not isinstance(text, (str, list))  # a tool's result, or an object, as text
        made: dict[str, Any] = {"role": role, "content": _text(text, compact=False) if as_json else text}
        calls = _calls(message)
        if calls:
            made["tool_calls"] = calls
        extra = _inner(message, "additional_kwargs", {})
        ident = message.get("tool_call_id") or message.get("toolCallId") or extra.get("tool_call_id")
        if ident:
            made["tool_call_id"] = str(ident)
        if role == "tool" and message.get("name"):
            made["name"] = message["name"]
        out.append(made)
    return out, tools


def chat_tools(tools: Any) -> list[dict[str, Any]]:
    """A list of tool definitions in any shape as Chat Completions function tools."""
    items = _parsed(tools)
    return [d for d in (_definition(t) for t in items) if d is not None] if isinstance(items, list) else []


def _attributes(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    found = _parsed(meta.get("attributes"))
    return found if isinstance(found, Mapping) else {}


def declared_tools(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tools an observation's metadata declares, as Chat Completions function tools.

    AI SDK's `tools`, GenAI's `gen_ai.tool.definitions`, pydantic-ai's `model_request_parameters.function_tools`.
    """
    attributes = _attributes(meta)
    request = _parsed(attributes.get("model_request_parameters"))
    for found in (meta.get("tools"), attributes.get("gen_ai.tool.definitions"),
                  request.get("function_tools") if isinstance(request, Mapping) else None):
        tools = chat_tools(found)
        if tools:
            return tools
    return []


def instructions_of(meta: Mapping[str, Any], parameters: Any) -> str | None:
    """System instructions kept beside the messages (text parts joined).

    GenAI's `gen_ai.system_instructions`, else the model parameters' `instructions`.
    """
    found = _parsed(_attributes(meta).get("gen_ai.system_instructions"))
    if found is None and isinstance(parameters, Mapping):
        found = _parsed(parameters.get("instructions"))
    if isinstance(found, list):
        found = "\n".join(str(p.get("content", p.get("text", ""))) if isinstance(p, Mapping) else str(p)
                          for p in found)
    return found if isinstance(found, str) and found.strip() else None
