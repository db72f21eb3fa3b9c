"""Structured outputs: the JSON schema an answer had to follow, shown as a function it calls.

When the request's `text.format` (or the Response's echo of it, which is where the SDK's
`text_format=` ends up) is a `json_schema`, the schema is declared as a synthetic
`structured_output` function and the final JSON answer is rendered as a call to it, so the scorer
sees both the schema and the answer. Text that is not valid JSON is kept verbatim, with a warning.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tlmscore.convert._tools import DECLARATIONS
from tlmscore.model import Conversation, Message, ToolCall, Turn

STRUCTURED_OUTPUT = "structured_output"


def _schema_format(text: Any) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    return fmt if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else None


def json_schema_format(request: dict[str, Any], response: dict[str, Any],
                       history: Sequence[dict[str, Any]] = ()) -> dict[str, Any] | None:
    """The `json_schema` text format in force, or None for plain text.

    The last `configuration_update` in the input that sets a format wins, then the request's
    `text.format`, then an SDK `text_format=` logged as its JSON schema, then the Response's echo.
    """
    for item in reversed(history):
        if item.get("type") == "configuration_update" and isinstance(item.get("text"), dict):
            return _schema_format(item["text"])
    if isinstance(request.get("text"), dict) and request["text"].get("format") is not None:
        return _schema_format(request["text"])
    logged = request.get("text_format")
    if isinstance(logged, dict) and isinstance(logged.get("properties"), dict):
        return {"type": "json_schema", "name": logged.get("title"), "schema": logged}
    return _schema_format(response.get("text"))


def _is_answer_text(item: dict[str, Any]) -> bool:
    """A message answering in text (not a refusal), whose text is what the schema governs."""
    parts = item.get("content")
    types = {p.get("type") for p in parts if isinstance(p, dict)} if isinstance(parts, list) else set()
    return "output_text" in types and "refusal" not in types


def _as_call(turn: Message) -> tuple[ToolCall, str | None]:
    try:
        arguments: Any = json.loads(turn.text)
    except json.JSONDecodeError:
        return (ToolCall(name=STRUCTURED_OUTPUT, arguments=turn.text, call_id=STRUCTURED_OUTPUT),
                "the answer is not valid JSON for its json_schema text format; shown verbatim")
    return ToolCall(name=STRUCTURED_OUTPUT, arguments=arguments, call_id=STRUCTURED_OUTPUT), None


def apply_structured_output(conv: Conversation, fmt: dict[str, Any] | None,
                            output: Sequence[dict[str, Any]]) -> Conversation:
    """The conversation with the schema declared and the final text answer rendered as its call."""
    if fmt is None:
        return conv
    tools = (*conv.tools, *DECLARATIONS[STRUCTURED_OUTPUT](fmt))
    messages = [i for i in output if i.get("type") == "message" and i.get("role", "assistant") == "assistant"]
    answer: list[Turn] = list(conv.answer)
    said = [(i, t) for i, t in enumerate(answer) if isinstance(t, Message) and t.role == "assistant"]
    warnings = list(conv.warnings)
    if said and messages and _is_answer_text(messages[-1]):
        last, turn = said[-1]
        answer[last], warning = _as_call(turn)
        warnings.extend([warning] if warning else [])
    return replace(conv, tools=tools, has_tools=True, answer=tuple(answer), warnings=tuple(warnings))
