"""OpenAI's stored responses by id: `GET /v1/responses/{id}` and its `/input_items`, as transcript records.

Through `AsyncOpenAI` (its key from `OPENAI_API_KEY`, its retries honour `Retry-After` on 429s):
each response is fetched with every evidence `include` (web search sources and results, file
search results, code interpreter outputs; no logprobs), its input items page by page, and the
request rebuilt from both: `input` from the items, `instructions`, `tools`, `previous_response_id`
and the other request fields the Response echoes. An id that expired or was never stored is an
error record that says so, so it still becomes one row.

The key is `OPENAI_API_KEY`, which the `openai` SDK sends to `OPENAI_BASE_URL` (OpenAI's API when
unset). OpenAI keeps no traces to annotate: rows pulled from here are not written back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlmscore._contract import stored_id
from tlmscore._endpoint import Endpoint
from tlmscore.stores.agents import response_id
from tlmscore.stores.reading import rows, table_kind

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["INCLUDE", "ORIGIN", "done_ids", "fillable_id", "hydrate", "pending", "pull_one",
           "pull_records", "pull_to_file", "read_ids", "request_from", "stored_id", "stored_responses"]

ORIGIN = "openai"
INCLUDE = ("web_search_call.action.sources", "web_search_call.results", "file_search_call.results",
           "code_interpreter_call.outputs")
_ECHOED = ("instructions", "tools", "tool_choice", "text", "previous_response_id", "reasoning", "temperature",
           "top_p", "max_output_tokens", "parallel_tool_calls", "truncation", "prompt", "conversation")
_PAGE = 100
_NOT_FOUND = 404


def read_ids(given: str, column: str = "response_id") -> Iterator[str]:
    """Response ids from `given`: a file of ids (one a line), a table's `column`, or one id itself.

    An Agents SDK span export is a table whose Responses spans hold the id in `span_data`.
    """
    path = Path(given)
    if not path.is_file():
        yield given
        return
    kind = table_kind(path)
    if kind in ("parquet", "csv", "json") or (kind == "jsonl" and _first_is_object(path)):
        for _, row in rows(path, kind):
            value = (row.get(column) or (response_id(row) if column == "response_id" else None)
                     if isinstance(row, dict) else None)
            if isinstance(value, str) and value.strip():
                yield value.strip()
        return
    with path.open(encoding="utf-8") as handle:
        yield from (line.strip() for line in handle if line.strip() and not line.startswith("#"))


def _first_is_object(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.readline().lstrip().startswith(b"{")


def request_from(response: dict[str, Any], items: str | list[Any],
                 include: Sequence[str] = INCLUDE) -> dict[str, Any]:
    """The request of a Response (a dict): `input` is `items`, the other fields those the Response echoes."""
    request: dict[str, Any] = {"model": response.get("model"), "input": items}
    if include:
        request["include"] = list(include)
    request.update({k: response[k] for k in _ECHOED if response.get(k) is not None})
    return request


def _missing(rid: str, status: int, message: str) -> dict[str, Any]:
    why = ("it expired or was never stored (store=false)" if status == _NOT_FOUND else f"the API answered {status}")
    return {"id": rid, "origin": ORIGIN, "error": {"message": f"stored response {rid} could not be pulled: "
                                                              f"{why}: {message}", "status": status}}


async def pull_one(client: AsyncOpenAI, rid: str) -> dict[str, Any]:
    """The record of one stored response, or an error record saying why there is none."""
    import openai  # noqa: PLC0415  (the SDK's errors, loaded with the client)

    try:
        response = await client.responses.retrieve(rid, include=list(INCLUDE))  # type: ignore[arg-type]
        items = [item.model_dump(mode="json", exclude_unset=True, warnings=False)
                 async for item in client.responses.input_items.list(rid, order="asc", limit=_PAGE)]
    except openai.APIStatusError as exc:
        return _missing(rid, exc.status_code, str(exc.message))
    except openai.APIConnectionError as exc:
        return _missing(rid, 0, f"{type(exc).__name__}: {exc}")
    # The SDK parses provider variants into its nearest types; dumping them back warns, and need not.
    body = response.model_dump(mode="json", exclude_unset=True, warnings=False)
    return {"id": rid, "request": request_from(body, items), "response": body, "origin": ORIGIN,
            "metadata": {"pulled": "responses.retrieve"}}


def stored_responses(base_url: str | None, needing: str) -> Endpoint:
    """The stored responses' API (`base_url`, else `OPENAI_BASE_URL` or OpenAI's), its key in `OPENAI_API_KEY`.

    `needing` names what needs the key (`pull`, `--hydrate`) in the line a missing key gives.
    """
    return Endpoint(base_url, key_envs=("OPENAI_API_KEY",), key_needed=True,
                    missing=f"{needing} needs an API key in OPENAI_API_KEY")


def fillable_id(record: Any) -> str | None:
    """The id of the stored response `--hydrate` reads a record from, else None.

    That is the id of a record that holds only the id, or of one a trace kept only part of (a span's `hydrate_id`).
    """
    rid = record.get("hydrate_id") if isinstance(record, dict) else None
    return rid if isinstance(rid, str) and rid.strip() else stored_id(record)


async def hydrate(client: AsyncOpenAI, record: dict[str, Any]) -> dict[str, Any]:
    """`record` filled in with the stored response of its `fillable_id` and that response's input items.

    The record keeps its own id, origin, trace and span ids and metadata (not the warnings of what
    its span lost). When the response cannot be pulled, a record that held only the id is an error
    record saying why, and a span's record stays as it is, with a warning saying why.
    """
    rid = fillable_id(record)
    if rid is None:
        return record
    pulled = await pull_one(client, rid)
    partial = stored_id(record) is None
    kept: dict[str, Any] = {k: record[k] for k in ("id", "origin", "trace_id", "span_id") if k in record}
    given = record.get("metadata")
    metadata: dict[str, Any] = given if isinstance(given, dict) else {}
    if "error" in pulled and partial:
        said = [*record.get("warnings", []), f"--hydrate: {pulled['error']['message']}; read from the trace"]
        return {**record, "warnings": said}
    if "error" in pulled:
        return {**pulled, **kept, "warnings": record.get("warnings", []), "metadata": metadata}
    return {**pulled, **kept, "metadata": {**metadata, "hydrated": rid}}


async def pull_records(client: AsyncOpenAI, ids: Iterable[str], concurrency: int = 8) -> AsyncIterator[dict[str, Any]]:
    """The records of `ids`, in their order, fetched `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(rid: str) -> dict[str, Any]:
        async with gate:
            return await pull_one(client, rid)

    window: list[asyncio.Task[dict[str, Any]]] = []
    for rid in ids:
        window.append(asyncio.ensure_future(one(rid)))
        if len(window) >= concurrency * 4:
            yield await window.pop(0)
    for task in window:
        yield await task


def done_ids(path: Path) -> set[str]:
    """The ids an earlier, interrupted pull already wrote to `path` (for `--resume`)."""
    if not path.is_file():
        return set()
    return {str(row["id"]) for _, row in rows(path, "jsonl") if isinstance(row, dict) and row.get("id")}


def pending(ids: Sequence[str], done: set[str]) -> list[str]:
    """`ids` not yet done, each once, in order."""
    return [rid for rid in dict.fromkeys(ids) if rid not in done]


async def pull_to_file(client: AsyncOpenAI, ids: Sequence[str], output: Path, *, concurrency: int = 8,
                       resume: bool = False) -> tuple[int, int]:
    """Write the records of `ids` to `output` (JSON lines, in order, each line as it is ready).

    With `resume`, ids already in `output` are skipped and new lines appended. Returns the lines
    written and how many of them are error records.
    """
    import orjson  # noqa: PLC0415  (kept beside its one use)

    todo = pending(ids, done_ids(output) if resume else set())
    written = errors = 0
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("ab" if resume else "wb") as handle:
        async for record in pull_records(client, todo, concurrency):
            handle.write(orjson.dumps(record) + b"\n")
            handle.flush()
            written += 1
            errors += "error" in record
    return written, errors
