"""`code_interpreter_call`: the code the model ran in its container, and the logs and images it got.

xAI logs its code execution tool as a `code_interpreter_call` carrying `arguments` (JSON with the
code) and no outputs; both shapes become the same `code_interpreter` call.
"""

from __future__ import annotations

from typing import Any

from tlmscore.convert._functions import parse_arguments
from tlmscore.convert._outputs import NOT_LOGGED, image_placeholder
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import ToolCall, ToolResult, Turn

CODE_INTERPRETER = "code_interpreter"


def _code(item: dict[str, Any], ctx: Context) -> str:
    if isinstance(item.get("code"), str):
        return str(item["code"])
    args = parse_arguments(item.get("arguments"), ctx, CODE_INTERPRETER)
    if isinstance(args, dict) and "code" in args:
        return str(args["code"])
    return "" if args in ({}, None) else str(args)


def _outputs(outputs: list[Any]) -> list[dict[str, Any]]:
    shown: list[dict[str, Any]] = []
    for out in outputs:
        if not isinstance(out, dict):
            continue
        if out.get("type") == "logs":
            shown.append({"logs": str(out.get("logs") or "")})
        elif out.get("type") == "image":
            shown.append({"image": image_placeholder(out.get("url"))})
        else:
            shown.append({str(k): v for k, v in out.items()})
    return shown


def convert_code_interpreter(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """The code as the call; its logs and images (placeholders) as the response."""
    call_id = str(item.get("id") or item.get("call_id") or "")
    ctx.use_tool(CODE_INTERPRETER)
    call = ToolCall(name=CODE_INTERPRETER, arguments={"code": _code(item, ctx)}, call_id=call_id, server=True)
    outputs = item.get("outputs")
    output: Any
    if isinstance(outputs, list):
        output = _outputs(outputs)
    else:
        ctx.warn("code_interpreter_call has no outputs: add include=['code_interpreter_call.outputs'] "
                 "to the request")
        output = NOT_LOGGED
    if item.get("status") in ("failed", "incomplete"):
        output = {"status": item["status"], "outputs": output}
    return [call, ToolResult(name=CODE_INTERPRETER, call_id=call_id, output=output)]


CONVERTERS: dict[str, ItemConverter] = {
    "code_interpreter_call": ItemConverter(convert_code_interpreter),
}
