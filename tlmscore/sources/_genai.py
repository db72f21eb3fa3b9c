"""OpenTelemetry GenAI semantic conventions: a span's messages as a Responses API call.

`gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages` and
`gen_ai.tool.definitions` (JSON text or structured values) become the request's `instructions`,
`input` and `tools` and the response's `output`. Parts: `text`, `tool_call`, `tool_call_response`
(its value in `response` or `result`), `reasoning`, `server_tool_call` and
`server_tool_call_response` (a built-in tool: shown as a call of that name and its result, with a
warning, as the convention does not say which items the provider's API returned), `blob`, `file`
and `uri` (shown as references, with a warning). Pure: values in, values out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def as_value(value: Any) -> Any:
    """An attribute that holds JSON text, parsed; anything else as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)  # keys in their order


def _reference(part: Mapping[str, Any]) -> str:
    kind = str(part.get("type"))
    where = part.get("uri") or part.get("file_id") or part.get("mime_type") or part.get("modality") or ""
    return f"[{kind} {where}]".replace(" ]", "]")


class _Items:
    """Items built from parts, and the warnings they call for."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self._texts: list[str] = []

    def flush(self, role: str, output: bool) -> None:
        if not self._texts:
            return
        text = "".join(self._texts)
        self._texts = []
        if output:
            self.items.append({"type": "message", "role": "assistant", "status": "completed",
                               "content": [{"type": "output_text", "text": text, "annotations": []}]})
        else:
            self.items.append({"role": role, "content": text})

    def part(self, part: Mapping[str, Any], role: str, output: bool) -> None:
        kind = part.get("type")
        if kind == "text":
            self._texts.append(str(part.get("content") or ""))
            return
        if kind in ("blob", "file", "uri"):
            self._texts.append(_reference(part))
            self.warnings.append(f"a {kind} part is shown as a reference, not its content")
            return
        self.flush(role, output)
        call_id = str(part.get("id") or f"call_{len(self.items)}")
        if kind in ("tool_call", "server_tool_call"):
            arguments = part.get("arguments") if kind == "tool_call" else part.get("server_tool_call")
            self.items.append({"type": "function_call", "call_id": call_id, "name": str(part.get("name") or "tool"),
                               "arguments": _text(arguments if arguments is not None else {})})
            if kind == "server_tool_call":
                self.warnings.append(f"built-in tool {part.get('name')!r} is shown as a function call: "
                                     "its sources are not fetched as evidence")
        elif kind in ("tool_call_response", "server_tool_call_response"):
            result = next((part[k] for k in ("response", "result", "server_tool_call_response") if k in part), None)
            self.items.append({"type": "function_call_output", "call_id": call_id, "output": _text(result)})
        elif kind == "reasoning":
            self.items.append({"type": "reasoning", "id": f"rs_{len(self.items)}",
                               "summary": [{"type": "summary_text", "text": str(part.get("content") or "")}]})
        else:
            self._texts.append(_text(dict(part)))
            self.warnings.append(f"message part of type {kind!r} is shown as its JSON")


def messages_items(messages: Any, *, output: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """Responses items (input or output) of GenAI messages, and warnings about what they could not hold."""
    built = _Items()
    for message in as_value(messages) or []:
        if not isinstance(message, Mapping):
            raise TypeError(f"a GenAI message must be an object, not {type(message).__name__}")
        role = str(message.get("role") or "user")
        for part in message.get("parts") or []:
            if isinstance(part, Mapping):
                built.part(part, role, output)
        built.flush(role, output)
    return built.items, built.warnings


def _instructions(value: Any) -> str | None:
    parts = as_value(value)
    if parts is None:
        return None
    if isinstance(parts, str):
        return parts
    return "".join(str(p.get("content") or "") for p in parts if isinstance(p, Mapping) and p.get("type") == "text")


def _tools(value: Any) -> list[dict[str, Any]]:
    tools = as_value(value) or []
    return [{"type": "function", "name": t.get("name"), "description": t.get("description"),
             "parameters": t.get("parameters") or {}} for t in tools if isinstance(t, Mapping)]


def _finish(attributes: Mapping[str, Any], messages: Any) -> str | None:
    reasons = as_value(attributes.get("gen_ai.response.finish_reasons"))
    if isinstance(reasons, list) and reasons:
        return str(reasons[0])
    first = next((m for m in as_value(messages) or [] if isinstance(m, Mapping)), {})
    return str(first["finish_reason"]) if first.get("finish_reason") else None


def genai_call(attributes: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(request, response, warnings) of a GenAI span's attributes."""
    inputs, warned_in = messages_items(attributes.get("gen_ai.input.messages"), output=False)
    outputs, warned_out = messages_items(attributes.get("gen_ai.output.messages"), output=True)
    answers = sum(1 for item in outputs if item.get("type") == "message")
    if answers > 1:  # Responses' `phase` (commentary or final answer) has no place in the convention
        warned_out.append(f"the output holds {answers} assistant messages and not which were commentary: "
                          "all are read as the answer")
    model = attributes.get("gen_ai.request.model")
    request: dict[str, Any] = {"model": model, "input": inputs}
    instructions = _instructions(attributes.get("gen_ai.system_instructions"))
    if instructions is not None:
        request["instructions"] = instructions
    tools = _tools(attributes.get("gen_ai.tool.definitions"))
    if tools:
        request["tools"] = tools
    finish = _finish(attributes, attributes.get("gen_ai.output.messages"))
    incomplete = finish in ("length", "max_tokens")
    response = {"id": attributes.get("gen_ai.response.id"), "object": "response",
                "model": attributes.get("gen_ai.response.model") or model, "output": outputs,
                "status": "incomplete" if incomplete else "completed",
                "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None}
    return request, response, sorted(set(warned_in + warned_out))
