"""Client-side function calls and their outputs, as the reference renders them."""

from __future__ import annotations

import json
from typing import Any

from tlmscore.convert._outputs import call_id_of, tool_output
from tlmscore.convert._tools import qualified_name
from tlmscore.convert.context import Context, ItemConverter, ItemKind
from tlmscore.model import ToolCall, ToolResult, Turn

PROGRAM = "program"


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


def program_caller(item: dict[str, Any]) -> str | None:
    """The call id of the program that made this call (programmatic tool calling), else None."""
    caller = item.get("caller")
    if isinstance(caller, dict) and caller.get("type") == "program":
        return str(caller.get("caller_id") or "")
    return None


def call_kind(item: dict[str, Any]) -> ItemKind:
    """A call the model made may be its answer; a call its program made is part of the program's run."""
    return "transparent" if program_caller(item) is not None else "answer"


def convert_function_call(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A `function_call` the model made, named `namespace.name` when it names a namespace.

    A call made by a program the model wrote (`caller.type == "program"`) is not the model's: it is
    shown as a step of that program's run, in a response of the `program` call.
    """
    name = qualified_name(item.get("namespace"), item.get("name"))
    return client_call(item, ctx, name, parse_arguments(item.get("arguments"), ctx, name))


def client_call(item: dict[str, Any], ctx: Context, name: str, arguments: Any) -> list[Turn]:
    """A call for the client to run: the model's own, or a step of the run of the program that made it."""
    call_id = call_id_of(item)
    ctx.call_names.setdefault(call_id, name)
    program = program_caller(item)
    if program is not None:
        ctx.program_calls[call_id] = program
        step = {"program_called": name, "arguments": arguments, "call_id": call_id}
        return [ToolResult(name=PROGRAM, call_id=program, output=step)]
    return [ToolCall(name=name, arguments=arguments, call_id=call_id)]


def convert_function_call_output(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A `function_call_output` returned by the client, named after the call it answers.

    A string output is shown as it is (as the reference shows it); a list of content parts as
    text, with images and files as placeholders. The output of a call a program made went to the
    program, and is shown as a step of its run.
    """
    return client_output(item, ctx, "function", "output for call")


def client_output(item: dict[str, Any], ctx: Context, kind: str, what: str) -> list[Turn]:
    """What the client returned for a call of `kind` (named after the call it answers; `what` in a warning).

    The output of a call a program made went to the program: it is shown as a step of its run.
    """
    call_id = str(item.get("call_id") or "")
    name = ctx.answered_call(call_id, kind, what)
    output = tool_output(item.get("output"))
    if call_id in ctx.program_calls:
        step = {"returned_to_program": output, "from": name, "call_id": call_id}
        return [ToolResult(name=PROGRAM, call_id=ctx.program_calls[call_id], output=step)]
    return [ToolResult(name=name, call_id=call_id, output=output)]


CONVERTERS: dict[str, ItemConverter] = {
    "function_call": ItemConverter(convert_function_call, kind="answer", classify=call_kind),
    "function_call_output": ItemConverter(convert_function_call_output),
}
