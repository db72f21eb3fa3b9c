"""Client-side function calls and their outputs, as the reference renders them."""

from __future__ import annotations

import json
from typing import Any

from tlmscore.convert._outputs import tool_output
from tlmscore.convert._tools import qualified_name
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import ToolCall, ToolResult, Turn


def parse_arguments(raw: Any, ctx: Context, name: str) -> Any:
    """Arguments as JSON; text that is not JSON is kept verbatim with a warning, not dropped."""
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        ctx.warn(f"arguments of call to {name!r} are not valid JSON; shown verbatim")
        return raw


def convert_function_call(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A `function_call` the model made, named `namespace.name` when it names a namespace."""
    name = qualified_name(item.get("namespace"), item.get("name"))
    call_id = str(item.get("call_id") or item.get("id") or "")
    ctx.call_names.setdefault(call_id, name)
    return [ToolCall(name=name, arguments=parse_arguments(item.get("arguments"), ctx, name), call_id=call_id)]


def convert_function_call_output(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A `function_call_output` returned by the client, named after the call it answers.

    A string output is shown as it is (as the reference shows it); a list of content parts as
    text, with images and files as placeholders.
    """
    call_id = str(item.get("call_id") or "")
    name = ctx.answered_call(call_id, "function", "output for call")
    return [ToolResult(name=name, call_id=call_id, output=tool_output(item.get("output")))]


CONVERTERS: dict[str, ItemConverter] = {
    "function_call": ItemConverter(convert_function_call, kind="answer"),
    "function_call_output": ItemConverter(convert_function_call_output),
}
