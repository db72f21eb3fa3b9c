"""xAI's server-side tools as streamed responses log them: `custom_tool_call` items, read as what they are.

Streamed, xAI logs the calls its own tools made on its servers as `custom_tool_call` items whose
`input` is a JSON string of the arguments; the same call, not streamed, logs them as
`web_search_call`, `x_search_call` and `code_interpreter_call` items named after the function that
ran. They are rewritten to those shapes before conversion, so they are shown as the server tools
they are (declared as such, their arguments not encoded twice, and given the pages the answer
cites), never as free-form client tools.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tlmscore._tables import json_cell

_X_SEARCH = frozenset({"x_keyword_search", "x_semantic_search", "x_user_search", "x_thread_fetch", "view_x_video"})
_WEB_SEARCH = frozenset({"web_search", "browse_page", "view_image"})
_CODE = frozenset({"code_execution"})
SERVER_FUNCTIONS = _X_SEARCH | _WEB_SEARCH | _CODE
"""The functions of xAI's server-side tools (X search, web search, code execution)."""


def _arguments(item: dict[str, Any]) -> dict[str, Any] | None:
    """The call's arguments when its `input` is a JSON object (a server tool's), else None."""
    value = json_cell(item.get("input"))
    return value if isinstance(value, dict) else None


def server_item(item: dict[str, Any], client_tools: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One item: an xAI server tool's `custom_tool_call` in its non-streamed shape; any other as it is.

    A custom tool the request itself declares under that name stays a client tool.
    """
    name = item.get("name")
    if item.get("type") != "custom_tool_call" or name not in SERVER_FUNCTIONS or name in client_tools:
        return item
    args = _arguments(item)
    if args is None:
        return item
    kind = "x_search_call" if name in _X_SEARCH else "web_search_call" if name in _WEB_SEARCH \
        else "code_interpreter_call"
    return {"type": kind, "id": item.get("id") or item.get("call_id"), "name": name,
            "arguments": json.dumps(args, ensure_ascii=False), "status": item.get("status") or "completed"}


def server_items(items: Sequence[dict[str, Any]], tools: Any) -> list[dict[str, Any]]:
    """`items` with xAI's streamed server tool calls in their non-streamed shapes."""
    custom = frozenset(str(t.get("name")) for t in tools if isinstance(t, dict) and t.get("type") == "custom") \
        if isinstance(tools, list) else frozenset()
    return [server_item(item, custom) for item in items]
