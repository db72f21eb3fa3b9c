"""`file_search_call`: a synthetic `file_search` call and its results, as the reference does."""

from __future__ import annotations

from typing import Any

from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import ToolCall, ToolResult, Turn

__all__ = ["CONVERTERS", "FILE_SEARCH_NOT_LOGGED"]

FILE_SEARCH_NOT_LOGGED = (
    "The search results were not recorded in this log (the request did not include "
    "'file_search_call.results'), so what the documents said is unknown."
)
_RESULT_FIELDS = ("attributes", "file_id", "filename", "score", "text")


def convert_file_search(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """The searched queries as the call, the retrieved passages as its response."""
    call_id = str(item.get("id") or "")
    ctx.use_tool("file_search")
    call = ToolCall(name="file_search", arguments={"queries": item.get("queries") or []}, call_id=call_id,
                    server=True)
    results = item.get("results")
    if results is None:
        ctx.warn("file_search_call has no results: add include=['file_search_call.results'] to the request")
        output: Any = FILE_SEARCH_NOT_LOGGED
    else:
        output = [{key: r.get(key) for key in _RESULT_FIELDS} for r in results if isinstance(r, dict)]
    return [call, ToolResult(name="file_search", call_id=call_id, output=output)]


CONVERTERS: dict[str, ItemConverter] = {
    "file_search_call": ItemConverter(convert_file_search),
}
