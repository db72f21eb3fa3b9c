"""Tool declarations for the tools section: the request's tools, and built-in tools that ran.

Function tools keep the reference's JSON shape byte for byte; built-in tools are declared as the
function the synthetic calls name, so every call in the prompt has a declaration.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

_OBJECT = "object"
Declarer = Callable[[dict[str, Any]], list[dict[str, Any]]]


def _params(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": _OBJECT, "properties": props, "required": required}


PROGRAM_ONLY = "Only a program the model writes with the `program` tool can call this tool; the model cannot."


def _function(tool: dict[str, Any]) -> list[dict[str, Any]]:
    given: dict[str, Any] = {k: tool[k] for k in ("description", "parameters") if k in tool}
    return [{"type": "function", "name": tool.get("name"), **given, "strict": tool.get("strict", True)}]


def _program_only(tool: dict[str, Any]) -> list[str] | None:
    """The tool's `allowed_callers` when they leave out `direct` (only a program may call it), else None."""
    callers = tool.get("allowed_callers")
    if isinstance(callers, list) and callers and "direct" not in callers:
        return [str(c) for c in callers]
    return None


def _callers_noted(tool: dict[str, Any], decls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Declarations of a tool only programs may call, saying so; others as they are (the reference's bytes)."""
    callers = _program_only(tool)
    if callers is None:
        return decls
    noted = []
    for decl in decls:
        description = str(decl.get("description") or "")
        noted.append({**decl, "description": f"{description} ({PROGRAM_ONLY})".strip(), "allowed_callers": callers})
    return noted


def _decl(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "name": name, "description": description, "parameters": parameters}


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _strings(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _fixed(name: str, description: str, props: dict[str, Any], required: list[str]) -> Declarer:
    """The declarer of a built-in tool declared the same whatever the request sets for it."""
    decl = _decl(name, description, _params(props, required))
    return lambda tool: [copy.deepcopy(decl)]


_file_search = _fixed("file_search", "Search user-uploaded documents for relevant passages.",
                      {"queries": _strings("Search queries to run against the document index.")}, ["queries"])
_web_search = _fixed("web_search_call", "Search the web for relevant information.",
                     {"query": _string("Search the web with a query and return relevant pages.")}, ["query"])
_open_page = _fixed("open_page", "Open a web page and read its content.",
                    {"url": _string("The URL of the page to open.")}, ["url"])
_find_in_page = _fixed("find_in_page", "Find a pattern in a web page and read the passages around it.",
                       {"url": _string("The URL of the page to search."),
                        "pattern": _string("The text to look for in the page.")}, ["url", "pattern"])
_code_interpreter = _fixed("code_interpreter", "Run Python code in a sandboxed container and read its logs and images.",
                           {"code": _string("Python code to run in the sandboxed container.")}, ["code"])
_image_generation = _fixed("image_generation", "Generate or edit an image from a text prompt.",
                           {"prompt": _string("What the image should show.")}, ["prompt"])
_local_shell = _fixed("local_shell", "Run a command in the user's local shell.",
                      {"command": _strings("The command and its arguments."),
                       "env": {"type": "object", "description": "Environment variables."},
                       "working_directory": _string("Where to run the command."),
                       "timeout_ms": {"type": "integer"}, "user": _string("The user to run as.")}, ["command"])
_shell = _fixed("shell", "Run shell commands and read their stdout, stderr and exit codes.",
                {"commands": _strings("Shell commands to run in order."), "timeout_ms": {"type": "integer"},
                 "max_output_length": {"type": "integer"}}, ["commands"])
_apply_patch = _fixed("apply_patch", "Create, update or delete a file with a unified diff.",
                      {"type": {"type": "string", "enum": ["create_file", "update_file", "delete_file"]},
                       "path": _string("The file to change."),
                       "diff": _string("The unified diff to apply (not for delete_file).")}, ["type", "path"])
_program = _fixed("program", "Write a program that calls the available tools and returns its result.",
                  {"code": _string("JavaScript that calls the tools as `await tools.<name>(args)` and reports "
                                   "with text().")}, ["code"])


def _through_use(tool: dict[str, Any]) -> list[dict[str, Any]]:
    """Nothing for the tool itself: it is declared through what it made available.

    An MCP server through the tools it listed (`mcp_list_tools`), xAI's x_search through the
    functions its calls name.
    """
    return []


def _mcp_tool(tool: dict[str, Any]) -> list[dict[str, Any]]:
    decl: dict[str, Any] = {"type": "function", "name": tool.get("name")}
    label = tool.get("server_label")
    description = str(tool.get("description") or "").strip()
    decl["description"] = f"{description} (MCP server {label!r})".strip() if label else description
    decl["parameters"] = tool.get("input_schema") or {"type": _OBJECT, "properties": {}}
    return [decl]


def _computer(tool: dict[str, Any]) -> list[dict[str, Any]]:
    screen = ""
    if tool.get("display_width") and tool.get("display_height"):
        screen = f" The display is {tool['display_width']}x{tool['display_height']} pixels"
        screen += f" ({tool['environment']})." if tool.get("environment") else "."
    actions = ["click", "double_click", "drag", "keypress", "move", "screenshot", "scroll", "type", "wait"]
    props = {"type": {"type": "string", "enum": actions, "description": "The action to perform."},
             "x": {"type": "integer"}, "y": {"type": "integer"}, "button": {"type": "string"},
             "keys": _strings("Keys to press."), "text": _string("Text to type."),
             "scroll_x": {"type": "integer"}, "scroll_y": {"type": "integer"},
             "path": {"type": "array", "items": {"type": "object"}, "description": "Drag path points."}}
    return [_decl("computer", "Control a computer: act on the screen and receive a screenshot." + screen,
                  _params(props, ["type"]))]


def _custom(tool: dict[str, Any]) -> list[dict[str, Any]]:
    description = str(tool.get("description") or "")
    fmt = tool.get("format")
    hint = "Free-form text input."
    if isinstance(fmt, dict) and fmt.get("type") == "grammar":
        hint = f"Input that matches this {fmt.get('syntax', '')} grammar:\n{fmt.get('definition', '')}"
    return [_decl(str(tool.get("name")), f"{description}\n{hint}".strip(),
                  _params({"input": _string(hint)}, ["input"]))]


def qualified_name(namespace: Any, name: Any) -> str:
    """A tool's name as declared and called: `namespace.name`, or the name alone.

    The name stands alone when there is no namespace or the namespace is the tool itself (a
    deferred function is loaded as a namespace of its own name).
    """
    name = str(name or "function")
    return f"{namespace}.{name}" if isinstance(namespace, str) and namespace and namespace != name else name


def _namespace(tool: dict[str, Any]) -> list[dict[str, Any]]:
    """The namespace's tools, each named `namespace.tool` so that two `search` tools stay apart."""
    declared: list[dict[str, Any]] = []
    for inner in tool.get("tools") or []:
        if isinstance(inner, dict) and not inner.get("defer_loading"):
            declarer = DECLARATIONS.get(str(inner.get("type", "function")))
            named = {**inner, "name": qualified_name(tool.get("name"), inner.get("name"))}
            declared.extend(declarer(named) if declarer is not None else [])
    return declared


def _json_type(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, (int, float)):
        return {"type": "number"}
    if isinstance(value, list):
        return {"type": "array", "items": _json_type(value[0]) if value else {}}
    return {"type": "object"} if isinstance(value, dict) else {"type": "string"}


def _tool_search(tool: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool search as the request declares it, or with the arguments its calls used.

    The hosted tool search is listed without a schema; it is declared with the arguments of its
    calls in the log (`paths` of the tools to load, when there is no call).
    """
    description = tool.get("description") or "Search the deferred tools and load the ones needed."
    used = tool.get("called_with")
    if tool.get("parameters"):
        parameters = tool["parameters"]
    elif isinstance(used, dict) and used:
        parameters = _params({k: _json_type(v) for k, v in used.items()}, list(used))
    else:
        parameters = _params({"paths": _strings("Names of the tools to load.")}, [])
    return [_decl("tool_search", str(description), parameters)]


def _structured_output(tool: dict[str, Any]) -> list[dict[str, Any]]:
    """The schema of a `json_schema` text format, as the function the final answer must call."""
    name = tool.get("name")
    description = str(tool.get("description") or "")
    lead = f"Give the final answer as JSON that follows the schema {name!r}." if name else \
        "Give the final answer as JSON that follows this schema."
    decl = _decl("structured_output", f"{lead} {description}".strip(),
                 tool.get("schema") or {"type": _OBJECT, "properties": {}})
    if tool.get("strict") is not None:
        decl["strict"] = bool(tool["strict"])
    return [decl]


def _server_function(tool: dict[str, Any]) -> list[dict[str, Any]]:
    """A provider-side function known only by the calls made to it (xAI's x_search functions)."""
    return [_decl(str(tool.get("name")), str(tool.get("description") or ""), {"type": _OBJECT})]


DECLARATIONS: dict[str, Declarer] = {
    "function": _function,
    "file_search": _file_search,
    "web_search": _web_search,
    "web_search.open_page": _open_page,
    "web_search.find_in_page": _find_in_page,
    "code_interpreter": _code_interpreter,
    "mcp": _through_use,
    "mcp.tool": _mcp_tool,
    "image_generation": _image_generation,
    "computer": _computer,
    "computer_use_preview": _computer,
    "local_shell": _local_shell,
    "shell": _shell,
    "apply_patch": _apply_patch,
    "custom": _custom,
    "namespace": _namespace,
    "tool_search": _tool_search,
    "programmatic_tool_calling": _program,
    "program": _program,
    "structured_output": _structured_output,
    "x_search": _through_use,
    "server_function": _server_function,
}

_LISTED_ONLY = frozenset({"file_search"})
_FAMILIES = {
    "web_search_preview": "web_search",
    "web_search_2025_08_26": "web_search",
    "web_search_preview_2025_03_11": "web_search",
}


def tool_family(tool_type: str) -> str:
    """The declaration a tool type shares (dated and preview variants of web search are one)."""
    return _FAMILIES.get(tool_type, tool_type)


def declare_tools(tools: Iterable[dict[str, Any]], used: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Declarations for the request's tools, then for built-in tools used but not declared.

    Tool types without a declaration are left out, as the reference leaves them out; so are tools
    with `defer_loading` (the model sees them where a tool search loads them). A file search
    that ran is declared only when the request lists it, as the reference does; every other tool
    that ran is declared even when the request does not list it (e.g. in replayed history), so
    that each call in the prompt has a declaration, and no name is declared twice by this rule.
    """
    declared: list[dict[str, Any]] = []
    families: set[str] = set()
    for listed in tools:
        family = tool_family(str(listed.get("type", "function")))
        families.add(family)
        declarer = DECLARATIONS.get(family)
        if listed.get("defer_loading"):
            continue  # declared where a tool search loads it, not up front
        tool = {**listed, "called_with": used[family].get("called_with")} if family == "tool_search" \
            and family in used else listed
        if declarer is not None:  # a namespace may repeat a tool listed on its own: declared once
            found = _callers_noted(tool, declarer(tool))
            declared.extend(d for d in found if family != "namespace" or d not in declared)
    names = {d.get("name") for d in declared}
    for key, tool in used.items():
        declarer = DECLARATIONS.get(tool_family(str(tool.get("type", key))))
        if key in families or key in _LISTED_ONLY or declarer is None or tool.get("defer_loading"):
            continue
        for decl in declarer(tool):
            if decl.get("name") not in names:
                names.add(decl.get("name"))
                declared.append(decl)
    return declared


def declare_tool(tool: dict[str, Any]) -> list[dict[str, Any]]:
    """One tool definition as declared in the tools section (deferred or not), or nothing."""
    declarer = DECLARATIONS.get(tool_family(str(tool.get("type", "function"))))
    if declarer is None:
        return []
    if tool.get("type") == "namespace":
        return declarer({**tool, "tools": [{k: v for k, v in t.items() if k != "defer_loading"}
                                           for t in tool.get("tools") or [] if isinstance(t, dict)]})
    return _callers_noted(tool, declarer(tool))


def declare_chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions tool in the reference's shape."""
    function = tool.get("function") or {}
    given = {k: function[k] for k in ("description", "parameters") if k in function}
    return {"type": "function", "function": {"name": function.get("name"), **given}}
