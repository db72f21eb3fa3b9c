"""What the official `opentelemetry-instrumentation-genai-openai` writes of a Responses call, read back.

Built-in tool parts as the provider's own items, the namespaces of function calls, calls of custom
tools and of the computer tool, and the JSON output a call asked for.

The official `opentelemetry-instrumentation-genai-openai` writes each built-in tool item of a
Responses output (web search, file search, code interpreter, image generation, MCP, tool search)
as a `server_tool_call` part (a `tool_search_output` as a `server_tool_call_response` part) whose
payload is the item itself: its fields as the API gave them, less `id`, `call_id`, `name` and
`type` (the tool's name: `web_search`, …) and any field that was null. `provider_item` makes the
API's item of such a part again, so it renders as the raw record's does: the synthetic call and
result in the prompt, never as the answer's own tool call, an image as a placeholder, not its bytes.

A span keeps a function call's name without its namespace (`search` for `crm.search`), and the
namespace's tools only as the namespace's name; `namespace_of` finds the namespace back from what
the span holds (see its rule), so the call is named as the raw record names it.

A call that asked for a structured output keeps only `gen_ai.output.type` `json` in its span, not
the schema: `output_format` asks for a `json_schema` answer of an unknown schema, so the answer is
shown as the raw record shows it (a call of `structured_output`), and `JSON_SCHEMA_LOST` says what is missing.
The span writes a refusal as text: an answer to such a call that is no JSON at all (it does not
open with `{` or `[`) is read as the refusal it is, as the raw record shows a refusal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["KEPT_GENAI_OPENAI", "as_requested", "output_format", "provider_item", "read_back"]

CALL_ITEMS = {"code_interpreter": "code_interpreter_call", "file_search": "file_search_call",
              "image_generation": "image_generation_call", "mcp": "mcp_call", "mcp_list_tools": "mcp_list_tools",
              "tool_search": "tool_search_call", "web_search": "web_search_call"}
"""The item type of a `server_tool_call` part's payload, by the payload's `type` (the tool's name)."""
RESPONSE_ITEMS = {"tool_search": "tool_search_output"}
"""The item type of a `server_tool_call_response` part's payload, by the payload's `type`."""
KEPT_GENAI_OPENAI = ("the span keeps the messages, function and custom tool calls, reasoning and the provider's "
                     "built-in items of the answer (without their null fields): citations, the definitions of "
                     "tools other than functions (and functions' strict flag), replayed built-in items, compaction, "
                     "item references and configuration updates, MCP approval requests and shell or patch calls, "
                     "if the call had any, are not in the trace (--hydrate reads the stored response)")
JSON_SCHEMA_LOST = ("the call asked for a JSON answer (gen_ai.output.type json) and the span keeps no schema: "
                    "the answer is shown as a structured output of an unknown schema")
NAMESPACE_UNKNOWN = ("the span names function {names} without a namespace, and it declares several namespaces: "
                     "the call is shown by its name alone")


def provider_item(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """The API's output item a built-in tool part holds (None: a part of another shape, read as a call)."""
    kind = part.get("type")
    payload = part.get(kind) if isinstance(kind, str) else None
    if not isinstance(payload, Mapping):
        return None
    table = CALL_ITEMS if kind == "server_tool_call" else RESPONSE_ITEMS
    item_type = table.get(str(payload.get("type")))
    if item_type is None:
        return None
    item: dict[str, Any] = {"type": item_type}
    if isinstance(part.get("id"), str):
        item["id"] = part["id"]
    item.update({k: v for k, v in payload.items() if k != "type"})
    name = part.get("name")
    if kind == "server_tool_call" and isinstance(name, str) and name != payload.get("type"):
        item["name"] = name  # an MCP call's tool
    return item


def _loaded(items: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Namespaces by the name of each function they hold, from the tools tool searches loaded."""
    found: dict[str, set[str]] = {}
    for item in items:
        if item.get("type") != "tool_search_output":
            continue
        for tool in item.get("tools") or []:
            if isinstance(tool, Mapping) and tool.get("type") == "namespace":
                for inner in tool.get("tools") or []:
                    if isinstance(inner, Mapping) and isinstance(inner.get("name"), str):
                        found.setdefault(inner["name"], set()).add(str(tool.get("name")))
    return found


def namespace_of(name: str, tools: Sequence[Mapping[str, Any]],
                 items: Sequence[Mapping[str, Any]]) -> tuple[str | None, bool]:
    """(the namespace of a function call named `name`, whether it could not be told).

    None when a function tool of that name is declared on its own, or no namespace is declared.
    Else the one namespace a tool search loaded a tool of that name from (`items`: the span's
    built-in items), or the one namespace declared; with several and none loaded, None and True.
    """
    namespaces = [str(t.get("name")) for t in tools if t.get("type") == "namespace" and t.get("name")]
    if not namespaces or any(t.get("type") == "function" and t.get("name") == name for t in tools):
        return None, False
    loaded = _loaded(items).get(name, set())
    if len(loaded) == 1:
        return next(iter(loaded)), False
    if len(namespaces) == 1:
        return namespaces[0], False
    return None, True


def _custom_calls(entries: list[dict[str, Any]], custom: set[str]) -> None:
    """Calls of custom tools (the span writes their free-form input as arguments) and results as the API's items."""
    called: set[str] = set()
    for entry in entries:
        if entry["kind"] == "call" and entry["name"] in custom:
            called.add(entry["id"])
            text = entry["arguments"] if isinstance(entry["arguments"], str) else json.dumps(entry["arguments"])
            item = {"type": "custom_tool_call", "call_id": entry["id"], "name": entry["name"], "input": text}
        elif entry["kind"] == "result" and entry["id"] in called:
            item = {"type": "custom_tool_call_output", "call_id": entry["id"], "output": entry["output"]}
        else:
            continue
        entry.clear()
        entry.update({"kind": "item", "item": item})


def _computer_calls(entries: list[dict[str, Any]]) -> None:
    """Computer calls (the span writes each as a call of `computer` with its action) and screenshots as the API's items.

    So the call renders as the raw record's, and a screenshot as an image placeholder, not its bytes.
    """
    called: set[str] = set()
    for entry in entries:
        arguments = entry.get("arguments")
        if entry["kind"] == "call" and entry["name"] == "computer" and isinstance(arguments, Mapping) \
                and arguments and set(arguments) <= {"action", "actions"}:
            called.add(entry["id"])
            item = {"type": "computer_call", "call_id": entry["id"], **arguments}
        elif entry["kind"] == "result" and entry["id"] in called:
            output = json.loads(entry["output"]) if isinstance(entry["output"], str) and \
                entry["output"].startswith("{") else entry["output"]
            item = {"type": "computer_call_output", "call_id": entry["id"], "output": output}
        else:
            continue
        entry.clear()
        entry.update({"kind": "item", "item": item})


def qualify_calls(entries: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each function call of `entries` given its namespace, where the span tells it; the names it cannot tell."""
    _custom_calls(entries, {str(t.get("name")) for t in tools if t.get("type") == "custom"})
    _computer_calls(entries)
    items = [e["item"] for e in entries if e["kind"] == "item"]
    unknown: list[str] = []
    for entry in (e for e in entries if e["kind"] == "call"):
        namespace, untold = namespace_of(entry["name"], tools, items)
        if namespace is not None:
            entry["namespace"] = namespace
        elif untold and entry["name"] not in unknown:
            unknown.append(entry["name"])
    return unknown


def as_requested(request: dict[str, Any]) -> dict[str, Any]:
    """`request` with its tools as the call gave them.

    This instrumentation writes `"description": null` for a function tool that had none; other
    instrumentations keep what the call gave, a null included.
    """
    if not request.get("tools"):
        return request
    tools = [{k: v for k, v in t.items() if k != "description" or v is not None} for t in request["tools"]]
    return {**request, "tools": tools}


def output_format(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The request's `text` when the span says the call asked for JSON (`gen_ai.output.type`), else nothing."""
    if attributes.get("gen_ai.output.type") != "json":
        return {}
    return {"text": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {}}}}}


def _refusals(outputs: list[dict[str, Any]]) -> None:
    """The answer's text parts that are no JSON at all as refusals (the span writes a refusal as text)."""
    for entry in (e for e in outputs if e["kind"] == "message"):
        for part in entry["parts"]:
            text = str(part.get("text") or "")
            if part.get("type") == "output_text" and not text.lstrip().startswith(("{", "[")):
                try:
                    json.loads(text)
                except json.JSONDecodeError:
                    part.clear()
                    part.update({"type": "refusal", "refusal": text})


def read_back(attributes: Mapping[str, Any], inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
              tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """Calls named by their namespaces and refusals of a JSON answer read as such; the warnings they call for."""
    warnings = []
    unknown = qualify_calls([*inputs, *outputs], tools)
    if unknown:
        warnings.append(NAMESPACE_UNKNOWN.format(names=", ".join(unknown)))
    if output_format(attributes):
        _refusals(outputs)
        warnings.append(JSON_SCHEMA_LOST)
    return warnings
