"""Shell and patch tools: `local_shell`, `shell` (local or hosted container) and `apply_patch`.

The calls are the model's actions; a call the client must run ends the response and is part of
the answer. Outputs show stdout, stderr and how each command ended.
"""

from __future__ import annotations

from typing import Any

from tlmscore._tables import json_cell
from tlmscore.convert._outputs import api_object, call_id_of, tool_output
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import ToolCall, ToolResult, Turn

LOCAL_SHELL = "local_shell"
SHELL = "shell"
APPLY_PATCH = "apply_patch"
_HOSTED = ("container_auto", "container_reference")


def _present(fields: Any, skip: tuple[str, ...] = ("type",)) -> dict[str, Any]:
    """The set fields of an object (action, operation), without `skip`, in sorted order; not an object gives {}."""
    if not isinstance(fields, dict):
        return {}
    return {k: v for k, v in api_object(fields).items() if k not in skip}


def convert_local_shell_call(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A command for the client's local shell."""
    ctx.use_tool(LOCAL_SHELL)
    return [ToolCall(name=LOCAL_SHELL, arguments=_present(item.get("action")), call_id=call_id_of(item))]


def convert_local_shell_output(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """What the local shell printed (documented as a JSON string, decoded when it is one)."""
    output = json_cell(tool_output(item.get("output")))
    return [ToolResult(name=LOCAL_SHELL, call_id=call_id_of(item), output=output)]


def convert_shell_call(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """Shell commands, run by the client or in a hosted container."""
    ctx.use_tool(SHELL)
    env = item.get("environment")
    hosted = isinstance(env, dict) and env.get("type") in _HOSTED
    return [ToolCall(name=SHELL, arguments=_present(item.get("action")), call_id=call_id_of(item), server=hosted)]


def _chunk(chunk: Any) -> Any:
    if not isinstance(chunk, dict):
        return chunk
    shown: dict[str, Any] = {"stdout": chunk.get("stdout", ""), "stderr": chunk.get("stderr", "")}
    outcome = chunk.get("outcome")
    if isinstance(outcome, dict) and outcome.get("type") == "timeout":
        shown["timed_out"] = True
    elif isinstance(outcome, dict):
        shown["exit_code"] = outcome.get("exit_code")
    return shown


def convert_shell_output(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """Each command's stdout, stderr and exit code (or that it timed out)."""
    raw = item.get("output")
    output = [_chunk(c) for c in raw] if isinstance(raw, list) else tool_output(raw)
    return [ToolResult(name=SHELL, call_id=call_id_of(item), output=output)]


def convert_apply_patch_call(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A file created, updated (with its diff) or deleted."""
    ctx.use_tool(APPLY_PATCH)
    return [ToolCall(name=APPLY_PATCH, arguments=_present(item.get("operation"), ()), call_id=call_id_of(item))]


def convert_apply_patch_output(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """Whether the patch applied, and what the client said about it."""
    output = _present({"status": item.get("status"), "output": item.get("output")}, ())
    return [ToolResult(name=APPLY_PATCH, call_id=call_id_of(item), output=output)]


CONVERTERS: dict[str, ItemConverter] = {
    "local_shell_call": ItemConverter(convert_local_shell_call, kind="answer"),
    "local_shell_call_output": ItemConverter(convert_local_shell_output),
    "shell_call": ItemConverter(convert_shell_call, kind="answer"),
    "shell_call_output": ItemConverter(convert_shell_output),
    "apply_patch_call": ItemConverter(convert_apply_patch_call, kind="answer"),
    "apply_patch_call_output": ItemConverter(convert_apply_patch_output),
}
