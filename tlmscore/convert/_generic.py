"""Items of a type no converter knows: shown as a generic call/response pair, with a warning."""

from __future__ import annotations

from typing import Any

from tlmscore.convert.context import Context
from tlmscore.model import ToolCall, ToolResult, Turn

_RESULT_KEYS = ("output", "outputs", "result", "results", "error")
_SKIP_KEYS = {"type", "id", "status", "call_id", *_RESULT_KEYS}


def convert_unknown(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """Everything the item holds, split into what was asked and what came back."""
    kind = str(item.get("type") or "unknown")
    ctx.warn(f"unhandled item type {kind!r}: rendered as a generic tool call")
    call_id = str(item.get("call_id") or item.get("id") or "")
    arguments = {k: v for k, v in item.items() if k not in _SKIP_KEYS}
    turns: list[Turn] = [ToolCall(name=kind, arguments=arguments, call_id=call_id, server=True)]
    result = {k: item[k] for k in _RESULT_KEYS if item.get(k) is not None}
    if result:
        turns.append(ToolResult(name=kind, call_id=call_id, output=result))
    return turns
