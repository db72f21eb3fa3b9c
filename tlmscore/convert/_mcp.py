"""MCP items: the tools a server listed, the calls made on it, approval requests and their answers.

Listed tools are declared in the tools section as `<server_label>.<tool>` functions, which is how
the model saw them; a call is rendered under the same name. A denied approval is the tool's
response, so the scorer sees the call did not run.
"""

from __future__ import annotations

from typing import Any

from tlmscore.convert._functions import parse_arguments
from tlmscore.convert._outputs import NOT_LOGGED, api_object
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import Message, ToolCall, ToolResult, Turn

MCP_TOOL = "mcp.tool"


def mcp_tool_name(server_label: Any, name: Any) -> str:
    """How an MCP server's tool is named in calls and declarations."""
    return f"{server_label or 'mcp'}.{name or 'tool'}"


def _use(ctx: Context, label: Any, name: Any, listed: dict[str, Any] | None = None) -> str:
    full = mcp_tool_name(label, name)
    tool: dict[str, Any] = {"type": MCP_TOOL, "name": full, "server_label": label}
    if listed is not None:
        tool |= {k: listed[k] for k in ("description", "input_schema") if k in listed}
        ctx.used_tools[f"{MCP_TOOL}:{full}"] = tool
    else:
        ctx.use_tool(f"{MCP_TOOL}:{full}", tool)
    return full


def convert_list_tools(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A server's tool list: each tool is declared; a listing error is shown as the model saw it."""
    label = item.get("server_label")
    for tool in item.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name"):
            _use(ctx, label, tool["name"], tool)
    if not item.get("error"):
        return []
    return [Message(role="system", text=f"MCP server {label!r} could not list its tools: {item['error']}")]


def convert_mcp_call(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A tool run on an MCP server by the provider: the call and its output or error."""
    name = _use(ctx, item.get("server_label"), item.get("name"))
    call_id = str(item.get("id") or "")
    call = ToolCall(name=name, arguments=parse_arguments(item.get("arguments"), ctx, name), call_id=call_id,
                    server=True)
    output: Any
    if item.get("error") is not None:
        output = {"error": api_object(item["error"])}
    elif item.get("output") is not None:
        output = item["output"]
    elif item.get("status") == "failed":
        output = {"error": "the call failed", "status": "failed"}
    else:
        output = NOT_LOGGED
    return [call, ToolResult(name=name, call_id=call_id, output=output)]


def convert_approval_request(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """The model asking to run an MCP tool; the run waits for the client's approval."""
    name = _use(ctx, item.get("server_label"), item.get("name"))
    call_id = str(item.get("id") or "")
    ctx.call_names.setdefault(call_id, name)
    return [ToolCall(name=name, arguments=parse_arguments(item.get("arguments"), ctx, name), call_id=call_id)]


def convert_approval_response(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """The client's decision on an approval request, as that call's response."""
    call_id = str(item.get("approval_request_id") or "")
    name = ctx.answered_call(call_id, "mcp_approval", "approval response for")
    approved = bool(item.get("approve"))
    output: dict[str, Any] = {"approved": approved}
    if not approved:
        output["result"] = "The user denied this call, so the tool did not run."
    if item.get("reason"):
        output["reason"] = item["reason"]
    return [ToolResult(name=name, call_id=call_id, output=output)]


CONVERTERS: dict[str, ItemConverter] = {
    "mcp_list_tools": ItemConverter(convert_list_tools),
    "mcp_call": ItemConverter(convert_mcp_call),
    "mcp_approval_request": ItemConverter(convert_approval_request, kind="answer"),
    "mcp_approval_response": ItemConverter(convert_approval_response),
}
