"""LangSmith run exports: runs of type `llm` logged by `wrap_openai` become records.

Read: runs as JSON lines, a JSON array, Parquet (the bulk export) or CSV, one run a row with the
run data format's fields (`id`, `trace_id`, `run_type`, `inputs`, `outputs`, `error`, `extra`, …;
`inputs` and `outputs` as objects or JSON text). A run of type `llm` is a record; chains, tools,
retrievers and the other run types are not.

`langsmith.wrappers.wrap_openai` logs the call's keyword arguments as `inputs` (the request, with
the SDK's unset values left out) and the returned `Response` or Chat Completion as `outputs` (its
`usage` renamed `usage_metadata` and reshaped, null fields left out): both are read back as they
are, with the null `description` of the function tools a Response echoes restored, so the prompt
and response are those of the raw call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tlmscore.sources._genai import as_value
from tlmscore.sources._tables import Peek, Read, read_rows, rows, table_kind

ORIGIN = "langsmith"


def is_run(row: Mapping[str, Any]) -> bool:
    """Whether a row is a LangSmith run: an id and a run type."""
    return isinstance(row.get("run_type"), str) and row.get("id") is not None


def detect(sample: Peek) -> bool:
    """A table whose first row is a LangSmith run."""
    return is_run(sample.first)


def _tool(tool: Any) -> Any:
    """A function tool the Response echoes, with its `description` back.

    The API always returns it (null when unset); `wrap_openai` dumps the Response without null fields.
    """
    if isinstance(tool, Mapping) and tool.get("type") == "function" and "description" not in tool:
        return {**tool, "description": None}
    return tool


def _response(outputs: Mapping[str, Any], chat: bool) -> dict[str, Any]:
    """The logged Response or Chat Completion, with `object` and tool descriptions the dump left out restored."""
    response = {k: v for k, v in outputs.items() if k != "usage_metadata"}
    if isinstance(response.get("tools"), list):
        response["tools"] = [_tool(t) for t in response["tools"]]
    if "choices" in response or chat:
        response.setdefault("object", "chat.completion")
    else:
        response.setdefault("object", "response")
    return response


def run_record(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The transcript record of an `llm` run; None for a run of another type.

    Raises `ValueError` for an `llm` run that holds no OpenAI call to read.
    """
    if str(run.get("run_type")).lower() != "llm":
        return None
    inputs, outputs = as_value(run.get("inputs")), as_value(run.get("outputs"))
    if not outputs and run.get("error"):
        first = (str(run["error"]).strip().splitlines() or ["error"])[0]  # repr of the exception, then its trace
        raise ValueError(f"the LLM call failed: {first}")
    if not isinstance(inputs, Mapping) or not isinstance(outputs, Mapping):
        raise TypeError("run has no inputs and outputs objects")
    chat = "messages" in inputs
    if "output" not in outputs and "choices" not in outputs:
        raise ValueError("run outputs hold no Response or Chat Completion (not an OpenAI call "
                         f"as wrap_openai logs it; keys: {', '.join(sorted(outputs)) or 'none'})")
    run_id = str(run.get("id"))
    extra = {"name": run.get("name"), "start_time": run.get("start_time"),
             "parent_run_id": run.get("parent_run_id"), "session_id": run.get("session_id"),
             "usage_metadata": outputs.get("usage_metadata")}
    trace_id = run.get("trace_id")
    return {"id": run_id, "request": dict(inputs), "response": _response(outputs, chat), "origin": ORIGIN,
            "trace_id": str(trace_id) if trace_id is not None else None, "span_id": run_id,
            "metadata": {k: v for k, v in extra.items() if v is not None}, "warnings": []}


def runs_records(numbered: Iterator[tuple[int, dict[str, Any] | str]]) -> Iterator[Read]:
    """The records of numbered run rows (or messages saying why a row is not one)."""
    return read_rows(numbered, run_record, "run")


def read(address: str) -> Iterator[Read]:
    """The `llm` runs of a run export, in the file's order."""
    path = Path(address)
    yield from runs_records(rows(path, table_kind(path) or "jsonl"))
