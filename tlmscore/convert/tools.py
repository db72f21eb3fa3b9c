"""Tool declarations for the tools section: the request's tools, and built-in tools that ran.

Function tools keep the reference's JSON shape byte for byte; built-in tools are declared as the
function the synthetic calls name, so every call in the prompt has a declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["DECLARATIONS", "declare_chat_tool", "declare_tools", "tool_family"]

_OBJECT = "object"


def _params(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": _OBJECT, "properties": props, "required": required}


def _function(tool: dict[str, Any]) -> list[dict[str, Any]]:
    decl: dict[str, Any] = {"type": "function", "name": tool.get("name")}
    if "description" in tool:
        decl["description"] = tool["description"]
    if "parameters" in tool:
        decl["parameters"] = tool["parameters"]
    decl["strict"] = tool.get("strict", True)
    return [decl]


def _file_search(tool: dict[str, Any]) -> list[dict[str, Any]]:
    queries = {
        "type": "array",
        "items": {"type": "string"},
        "description": "Search queries to run against the document index.",
    }
    return [{
        "type": "function",
        "name": "file_search",
        "description": "Search user-uploaded documents for relevant passages.",
        "parameters": _params({"queries": queries}, ["queries"]),
    }]


def _web_search(tool: dict[str, Any]) -> list[dict[str, Any]]:
    query = {"type": "string", "description": "Search the web with a query and return relevant pages."}
    return [{
        "type": "function",
        "name": "web_search_call",
        "description": "Search the web for relevant information.",
        "parameters": _params({"query": query}, ["query"]),
    }]


def _open_page(tool: dict[str, Any]) -> list[dict[str, Any]]:
    url = {"type": "string", "description": "The URL of the page to open."}
    return [{
        "type": "function",
        "name": "open_page",
        "description": "Open a web page and read its content.",
        "parameters": _params({"url": url}, ["url"]),
    }]


def _find_in_page(tool: dict[str, Any]) -> list[dict[str, Any]]:
    url = {"type": "string", "description": "The URL of the page to search."}
    pattern = {"type": "string", "description": "The text to look for in the page."}
    return [{
        "type": "function",
        "name": "find_in_page",
        "description": "Find a pattern in a web page and read the passages around it.",
        "parameters": _params({"url": url, "pattern": pattern}, ["url", "pattern"]),
    }]


Declarer = Callable[[dict[str, Any]], list[dict[str, Any]]]

DECLARATIONS: dict[str, Declarer] = {
    "function": _function,
    "file_search": _file_search,
    "web_search": _web_search,
    "web_search.open_page": _open_page,
    "web_search.find_in_page": _find_in_page,
}

_IMPLICIT = "web_search"
_FAMILIES = {
    "web_search_preview": "web_search",
    "web_search_2025_08_26": "web_search",
    "web_search_preview_2025_03_11": "web_search",
}


def tool_family(tool_type: str) -> str:
    """The declaration a tool type shares (dated and preview variants of web search are one)."""
    return _FAMILIES.get(tool_type, tool_type)


def declare_tools(tools: Iterable[dict[str, Any]], used: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Declarations for the request's tools, then for web tools used but not declared.

    Tool types without a declaration are left out, as the reference leaves them out; other
    built-in tools that ran are declared only when the request lists them, as the reference does.
    """
    declared: list[dict[str, Any]] = []
    families: set[str] = set()
    for tool in tools:
        family = tool_family(str(tool.get("type", "function")))
        families.add(family)
        declarer = DECLARATIONS.get(family)
        if declarer is not None:
            declared.extend(declarer(tool))
    for family, tool in used.items():
        declarer = DECLARATIONS.get(family)
        if family not in families and declarer is not None and family.startswith(_IMPLICIT):
            declared.extend(declarer(tool))
    return declared


def declare_chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions tool in the reference's shape."""
    function = tool.get("function") or {}
    inner: dict[str, Any] = {"name": function.get("name")}
    for key in ("description", "parameters"):
        if key in function:
            inner[key] = function[key]
    return {"type": "function", "function": inner}
