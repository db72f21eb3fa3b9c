"""The OpenAI Agents SDK: its span exports in, one record per Responses span; no write-back.

The SDK exports each span as `Span.export()` (`{"object": "trace.span", "id", "trace_id",
"parent_id", "started_at", "ended_at", "span_data": {"type": "response", "response_id", "usage"},
"error"}`). A file of those spans (JSON lines, a JSON array, Parquet or CSV with the same
fields) holds no call, only its `response_id`: each Responses span becomes a record
with that id alone, which `--hydrate` fills in from the stored response (`tlmscore.stores.openai`)
and which is otherwise an error row saying so. Traces and spans of other kinds are no records.

The SDK's traces go to OpenAI's platform, which takes no annotations: rows read from here are
not written back (a bare `--annotate` counts them as having no trace to go back to).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tlmscore._tables import json_cell
from tlmscore.stores.reading import Peek, Read, SourceReader, read_rows, rows, table_kind

__all__ = ["ORIGIN", "READER", "detect", "read", "response_id", "span_record"]

ORIGIN = "agents"


def detect(sample: Peek) -> bool:
    """A file whose first row is an exported span or trace."""
    first = sample.first
    return first.get("object") == "trace" or (first.get("object") == "trace.span" and "span_data" in first)


def nested(row: dict[str, Any]) -> dict[str, Any]:
    """A row as exported: `span_data` an object (a CSV cell holds it as JSON text)."""
    return {**row, "span_data": json_cell(row.get("span_data"))} if "span_data" in row else row


def span_record(span: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record of a Responses span (its response id, ids, times); None for other objects.

    Raises `ValueError` for a Responses span that failed or holds no response id.
    """
    data = span.get("span_data")
    if span.get("object") != "trace.span" or not isinstance(data, Mapping) or data.get("type") != "response":
        return None
    error = span.get("error")
    if error:
        message = error.get("message") if isinstance(error, Mapping) else None
        raise ValueError(f"the Responses call failed: {message or error}")
    rid = data.get("response_id")
    if not isinstance(rid, str) or not rid:
        raise ValueError("the Responses span holds no response_id (tracing kept no data of the call)")
    metadata = {"parent_id": span.get("parent_id"), "started_at": span.get("started_at"),
                "ended_at": span.get("ended_at"), "usage": data.get("usage")}
    return {"id": str(span.get("id")), "response_id": rid, "origin": ORIGIN, "trace_id": span.get("trace_id"),
            "span_id": span.get("id"), "metadata": {k: v for k, v in metadata.items() if v is not None}}


def read(address: str) -> Iterator[Read]:
    """The Responses spans of an export file, in the file's order."""
    path = Path(address)
    yield from read_rows(rows(path, table_kind(path) or "jsonl"), lambda row: span_record(nested(row)), "span")


def response_id(row: dict[str, Any]) -> str | None:
    """The response id of an exported Responses span (a table's row), else None."""
    try:
        record = span_record(nested(row))
    except ValueError:
        return None
    return record["response_id"] if record is not None else None


READER = SourceReader("agents", detect, read, wants="`object` `trace`, or `trace.span` with `span_data`")
"""The reader of the SDK's span exports (the registry lists it among every store's readers)."""
