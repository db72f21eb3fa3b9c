"""Custom tools, tool search, tools added mid-conversation, programs, compaction and references.

- `custom_tool_call`: free-form input (often under a grammar) to a custom tool, shown as the
  call's `input` argument; `custom_tool_call_output` is its response.
- `tool_search_call` / `tool_search_output`: the search for deferred tools and the tools it loaded,
  declared in its response (deferred tools are not declared up front).
- `additional_tools`: tools a developer added at this point; declared, and noted where they appear.
- `program` / `program_output`: code the model wrote for programmatic tool calling, and its result.
- `compaction`: an encrypted summary of earlier turns; nothing of it can be shown, which is said
  where it stands in the history. `compaction_trigger` and `configuration_update` are settings.
- `item_reference`: an earlier item by id; it was shown where it first appeared.
"""

from __future__ import annotations

from typing import Any

from tlmscore.convert._functions import PROGRAM, call_kind, client_call, client_output, parse_arguments
from tlmscore.convert._outputs import call_id_of, tool_output
from tlmscore.convert._tools import declare_tool, qualified_name
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import Message, ToolCall, ToolResult, Turn, is_item_reference

TOOL_SEARCH = "tool_search"
COMPACTED = ("[Earlier turns of this conversation were compacted into an encrypted summary that the "
             "model saw but that cannot be shown here.]")
COMPACTED_ABOVE = ("[The turns above were compacted at this point into an encrypted summary; from here on the "
                   "model saw that summary in their place.]")


def tool_names(tools: Any) -> list[str]:
    """The names of tool definitions (namespaces as `namespace.tool`), in order."""
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            names.extend(qualified_name(tool.get("name"), n) for n in tool_names(tool.get("tools")))
        else:
            names.append(str(tool.get("name") or tool.get("server_label") or tool.get("type")))
    return names


def convert_custom_call(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """The model's free-form input to a custom tool (or a program's, shown as a step of its run)."""
    name = str(item.get("name") or "custom_tool")
    ctx.use_tool(f"custom:{name}", {"type": "custom", "name": name})
    return client_call(item, ctx, name, {"input": item.get("input", "")})


def convert_custom_output(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """What the client's custom tool returned: text, or parts with placeholders."""
    return client_output(item, ctx, "custom_tool", "output for custom tool call")


def _search_call_id(item: dict[str, Any], ctx: Context) -> str:
    """A tool search output's call id, or else the id of the search call just before it."""
    if item.get("call_id"):
        return str(item["call_id"])
    for earlier in reversed(ctx.items[: ctx.index]):
        if earlier.get("type") == "tool_search_call":
            return call_id_of(earlier)
    return str(item.get("id") or "")


def convert_tool_search_call(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A search for deferred tools, run by the provider or (`execution: client`) by the client.

    Its arguments are noted, so a tool search the request declares without a schema (the hosted
    one) is declared with the arguments its calls use.
    """
    arguments = parse_arguments(item.get("arguments"), ctx, TOOL_SEARCH)
    ctx.use_tool(TOOL_SEARCH, {"type": TOOL_SEARCH, "called_with": arguments if isinstance(arguments, dict) else {}})
    return [ToolCall(name=TOOL_SEARCH, arguments=arguments, call_id=call_id_of(item),
                     server=item.get("execution") != "client")]


def convert_tool_search_output(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """The tools the search loaded, declared in its response: the model sees them from there on.

    Deferred tools are not in the tools section up front; this is where they appear, named as
    calls name them (`namespace.tool`). Each loaded tool is named under `loaded` as well.
    """
    tools = [t for t in item.get("tools") or [] if isinstance(t, dict)]
    declared = [decl for tool in tools for decl in declare_tool(tool)]
    output = {"loaded": tool_names(tools), "tools": declared}
    return [ToolResult(name=TOOL_SEARCH, call_id=_search_call_id(item, ctx), output=output)]


def convert_additional_tools(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """Tools made available at this point: declared, and named where they were added."""
    tools = item.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):  # declared in the tools section
            ctx.use_tool(f"{tool.get('type')}:{tool.get('name') or tool.get('server_label') or ''}", tool)
    names = ", ".join(tool_names(tools)) or "none"
    return [Message(role=str(item.get("role") or "developer"), text=f"Tools added: {names}")]


def convert_program(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A program the model wrote; it calls the tools and produces the program's result."""
    call_id = call_id_of(item)
    ctx.use_tool(PROGRAM)
    ctx.call_names.setdefault(call_id, PROGRAM)
    return [ToolCall(name=PROGRAM, arguments={"code": item.get("code", "")}, call_id=call_id, server=True)]


def convert_program_output(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """The result the program produced."""
    output: Any = tool_output(item.get("result"))
    if item.get("status") not in (None, "completed"):
        output = {"status": item["status"], "result": output}
    return [ToolResult(name=PROGRAM, call_id=str(item.get("call_id") or ""), output=output)]


def convert_compaction(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """Compacted history, said where it stands (nothing when it closes the output).

    With the turns it summarizes in the set they stay shown above the note; without them the
    summary is all the model had, and it is encrypted, so that is warned about.
    """
    if ctx.index >= len(ctx.items) - 1:
        return []
    if ctx.index > 0:
        return [Message(role="system", text=COMPACTED_ABOVE)]
    ctx.warn("the history starts with a compaction item: the turns it summarizes cannot be shown")
    return [Message(role="system", text=COMPACTED)]


def convert_setting(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """Items that change settings, not what the model saw (`compaction_trigger`, `configuration_update`)."""
    return []


def convert_item_reference(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A reference to an earlier item: already shown where it appeared, else warned about."""
    ref = item.get("id")
    if not any(earlier.get("id") == ref and not is_item_reference(earlier) for earlier in ctx.items[: ctx.index]):
        ctx.warn(f"item_reference {ref!r} points to an item that is not in the set; not shown")
    return []


CONVERTERS: dict[str, ItemConverter] = {
    "custom_tool_call": ItemConverter(convert_custom_call, kind="answer", classify=call_kind),
    "custom_tool_call_output": ItemConverter(convert_custom_output),
    "tool_search_call": ItemConverter(convert_tool_search_call, kind="answer"),
    "tool_search_output": ItemConverter(convert_tool_search_output),
    "additional_tools": ItemConverter(convert_additional_tools),
    "program": ItemConverter(convert_program, kind="answer"),
    "program_output": ItemConverter(convert_program_output),
    "compaction": ItemConverter(convert_compaction, kind="transparent"),
    "compaction_trigger": ItemConverter(convert_setting, kind="transparent"),
    "configuration_update": ItemConverter(convert_setting, kind="transparent"),
    "item_reference": ItemConverter(convert_item_reference),
}
