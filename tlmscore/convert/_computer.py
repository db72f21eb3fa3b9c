"""Computer use: the model's actions (`computer_call`) and the screenshots it got back.

A screenshot becomes a placeholder with its kind, size and content hash; pending safety checks
are shown with the action, and acknowledged ones with the screenshot.
"""

from __future__ import annotations

from typing import Any

from tlmscore.convert._outputs import api_object, call_id_of, image_placeholder
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import ToolCall, ToolResult, Turn

COMPUTER = "computer"


def _checks(checks: Any) -> list[dict[str, Any]]:
    if not isinstance(checks, list):
        return []
    return [api_object(c) for c in checks if isinstance(c, dict)]


def convert_computer_call(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """One action (`action`) or a batch of actions (`actions`) on the computer."""
    ctx.use_tool(COMPUTER)
    arguments: dict[str, Any]
    if isinstance(item.get("actions"), list):
        arguments = {"actions": api_object(item["actions"])}
    elif isinstance(item.get("action"), dict):
        arguments = api_object(item["action"])
    else:
        arguments = {}
    checks = _checks(item.get("pending_safety_checks"))
    if checks:
        arguments["pending_safety_checks"] = checks
    return [ToolCall(name=COMPUTER, arguments=arguments, call_id=call_id_of(item))]


def _screenshot(output: Any) -> str:
    if not isinstance(output, dict):
        return image_placeholder(None)
    if output.get("image_url"):
        return image_placeholder(str(output["image_url"]))
    if output.get("file_id"):
        return f"[image: file {output['file_id']}]"
    return image_placeholder(None)


def convert_computer_output(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """The screenshot taken after the action, as a placeholder."""
    output: Any = {"screenshot": _screenshot(item.get("output"))}
    checks = _checks(item.get("acknowledged_safety_checks"))
    if checks:
        output["acknowledged_safety_checks"] = checks
    if item.get("status") in ("failed", "incomplete"):
        output["status"] = item["status"]
    return [ToolResult(name=COMPUTER, call_id=str(item.get("call_id") or ""), output=output)]


CONVERTERS: dict[str, ItemConverter] = {
    "computer_call": ItemConverter(convert_computer_call, kind="answer"),
    "computer_call_output": ItemConverter(convert_computer_output),
}
