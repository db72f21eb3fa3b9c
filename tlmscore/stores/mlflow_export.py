"""MLflow traces as users export them: `Trace.to_json()` lines, and the `mlflow.search_traces()` table.

- `Trace.to_json()` (or `to_dict()`), one trace a line (or a JSON array of them): `{"info": {"trace_id":
  "tr-…", …}, "data": {"spans": […]}}`, each span as `Span.to_dict()` writes it (ids in base64, each
  attribute's value JSON text);
- the DataFrame `mlflow.search_traces()` returns, saved as Parquet (or CSV, JSON lines): one row a
  trace, its `trace` column the `to_json()` text and its `spans` column the same spans as objects
  (a column Parquet cannot type, such as `request`, saved as JSON text).

Each LLM span is a record as a live read makes it (the `span_records` of `tlmscore.stores.mlflow`, which
registers this reader: the same
`trace_id`, `span_id`, request and response, origin `mlflow`), so an export gives the rows of the
experiment read live; what it cannot hold (media MLflow keeps as attachments) is named in a warning.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tlmscore.stores.mlflow_attachments import export_warning
from tlmscore.stores.reading import Peek, Read, rows, table_kind

__all__ = ["Spans", "detect", "is_trace", "read", "trace_of"]

Spans = Callable[[Mapping[str, Any], str], Iterator[tuple[str, dict[str, Any] | None, str | None]]]
"""(trace, source) → (span id, record, error) for each LLM span of the trace."""


def _loaded(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip()[:1] == "{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


def trace_of(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """A row as `{"info", "spans"}`: a `to_json()` trace, or a `search_traces()` row; None when it is neither."""
    data = row.get("data")
    if isinstance(row.get("info"), Mapping) and isinstance(data, Mapping) and isinstance(data.get("spans"), list):
        return {"info": row["info"], "spans": data["spans"]}
    whole = _loaded(row.get("trace"))
    if isinstance(whole, Mapping) and whole is not row:
        return trace_of(whole)
    spans = _loaded(row.get("spans"))
    if isinstance(row.get("trace_id"), str) and isinstance(spans, list):
        return {"info": {"trace_id": row["trace_id"]}, "spans": spans}
    return None


def is_trace(row: Mapping[str, Any]) -> bool:
    """Whether a row is an MLflow trace (`to_json()`) or a `search_traces()` row."""
    if isinstance(row.get("info"), Mapping) and isinstance(row.get("data"), Mapping):
        return str(row["info"].get("trace_id", "")).startswith("tr-") or "spans" in row["data"]
    return str(row.get("trace_id", "")).startswith("tr-") and ("trace" in row or "spans" in row)


def detect(sample: Peek) -> bool:
    """A file whose first row is an MLflow trace or a `search_traces()` row."""
    return is_trace(sample.first)


def read(address: str, span_records: Spans,
         media: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Iterator[Read]:
    """The LLM spans of every trace in the file, in the file's order; a row that is no trace is an error.

    `media` puts a record's attachments back (from the server that keeps them); without it a record
    that has any says so in a warning.
    """
    path = Path(address)
    for line, row in rows(path, table_kind(path) or "jsonl"):
        if isinstance(row, str):
            yield Read(line, error=row)
            continue
        trace = trace_of(row)
        if trace is None:
            yield Read(line, error="not an MLflow trace: no `info` and `data.spans` (Trace.to_json), "
                                   "nor a `trace` or `spans` column (search_traces)")
            continue
        source = str((trace["info"].get("trace_location") or {}).get("mlflow_experiment", {}).get(
            "experiment_id") or path.name)
        for _, record, error in span_records(trace, source):
            if record is None:
                yield Read(line, error=error)
                continue
            if media is not None:
                yield Read(line, media(record))
                continue
            warning = export_warning(record)
            yield Read(line, {**record, "warnings": [warning]} if warning else record)
