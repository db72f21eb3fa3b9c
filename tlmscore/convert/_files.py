"""`file_search_call`: a synthetic `file_search` call and its results, as the reference does.

The answer's `file_citation` annotations are kept: each result carries the sentences that cite
its file (for scorers; the prompt bytes stay the reference's), and a citation of a file that is
among no logged result of the searches before the answer is warned about.
"""

from __future__ import annotations

from typing import Any

from tlmscore.convert._citations import Citation, message_citations
from tlmscore.convert._web import call_group
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import FileResult, ToolCall, Turn

FILE_SEARCH = "file_search_call"
FILE_SEARCH_NOT_LOGGED = (
    "The search results were not recorded in this log (the request did not include "
    "'file_search_call.results'), so what the documents said is unknown."
)
_RESULT_FIELDS = ("attributes", "file_id", "filename", "score", "text")


def _file_citations(ctx: Context) -> list[Citation]:
    """The answer's citations of files, warned about when no logged result of the searches before it holds them."""
    members, message = call_group(ctx, (FILE_SEARCH,))
    searches = [ctx.items[j] for j in members]
    if message is None or message.get("role", "assistant") != "assistant":
        return []
    cites = [c for c in message_citations(message) if c.kind == "file"]
    if searches and searches[-1] is ctx.items[ctx.index] and all(s.get("results") is not None for s in searches):
        found = {str(r.get("file_id")) for s in searches for r in s["results"] if isinstance(r, dict)}
        for cite in cites:
            if cite.file_id not in found:
                ctx.warn(f"the answer cites file {cite.title or cite.file_id!r}, which is among no logged "
                         "file_search result")
    return cites


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
    cited: dict[str, list[str]] = {}
    for cite in _file_citations(ctx):
        sentences = cited.setdefault(str(cite.file_id), [])
        if cite.sentence and cite.sentence not in sentences:
            sentences.append(cite.sentence)
    return [call, FileResult(name="file_search", call_id=call_id, output=output,
                             cited=tuple((k, tuple(v)) for k, v in cited.items()))]


CONVERTERS: dict[str, ItemConverter] = {
    FILE_SEARCH: ItemConverter(convert_file_search),
}
