"""Langfuse traces as its API returns them or its UI downloads them: a trace and its observations.

The UI's "Download trace" JSON is `{"trace": {…}, "observations": […]}`; the web API's answer is the
same with the observations also inside the trace; `GET /api/public/traces/{id}` returns the trace
with its `observations` inside; a page of `GET /api/public/observations` is `{"data": […], "meta": …}`.
Input, output and metadata are JSON values or JSON text. A file holds one trace (or page), a JSON
array of them, or one a line.

Each `GENERATION` observation is one record, read as an observation export's row is (the
`observation_record` of `tlmscore.stores.langfuse`, which registers this reader), in start-time
order; its `trace_id` is the trace's id and `span_id` the observation's. A trace without a
generation is one error row saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tlmscore.stores.reading import Peek, Read, read_rows, rows, table_kind

__all__ = ["Observation", "detect", "is_trace", "read", "trace_records"]

Observation = Callable[[Mapping[str, Any]], dict[str, Any] | None]
"""An observation row's record (None when it is no generation); raises `ValueError` when it holds no call."""


def _trace(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """The trace object of a row: `trace` beside the observations, else the row itself."""
    inner = row.get("trace")
    return inner if isinstance(inner, Mapping) else row


def _is_page(row: Mapping[str, Any]) -> bool:
    """A page of `GET /api/public/observations`: `{"data": [observation, …], "meta": {…}}`."""
    data = row.get("data")
    return isinstance(data, list) and isinstance(row.get("meta"), Mapping) and all(
        isinstance(o, Mapping) and "type" in o and ("traceId" in o or "trace_id" in o) for o in data)


def _observations(row: Mapping[str, Any]) -> list[Any]:
    if _is_page(row):
        return list(row["data"])
    found = row.get("observations")
    if not isinstance(found, list):
        found = _trace(row).get("observations")
    return found if isinstance(found, list) else []


def is_trace(row: Mapping[str, Any]) -> bool:
    """Whether a row is a Langfuse trace with its observations (not one observation), or a page of them."""
    if _is_page(row):
        return True
    return "type" not in row and _trace(row).get("id") is not None and (
        isinstance(row.get("observations"), list) or isinstance(_trace(row).get("observations"), list))


def detect(sample: Peek) -> bool:
    """A JSON (or JSON lines) file whose first value is a Langfuse trace with its observations."""
    return sample.kind in ("json", "jsonl") and is_trace(sample.first)


def trace_records(row: Mapping[str, Any], first: int, observation_record: Observation) -> Iterator[Read]:
    """One record (or error) per generation of a trace, numbered on from `first`."""
    trace_id = str(_trace(row).get("id") or "(a page of observations)")
    generations = sorted((o for o in _observations(row) if isinstance(o, Mapping)
                          and str(o.get("type") or "").upper() == "GENERATION"),
                         key=lambda o: str(o.get("startTime") or o.get("start_time") or ""))
    if not generations:
        yield Read(first, error=f"trace {trace_id}: it holds no GENERATION observation (no LLM call to read)")
        return
    given = ({**o, "traceId": o.get("traceId") or o.get("trace_id") or trace_id} for o in generations)
    yield from read_rows(enumerate(given, start=first), observation_record, f"trace {trace_id}, observation")


def read(address: str, observation_record: Observation) -> Iterator[Read]:
    """The generations of every trace in the file, a trace at a time, numbered across the file."""
    path = Path(address)
    number = 1
    for line, row in rows(path, table_kind(path) or "json"):
        if isinstance(row, str) or not is_trace(row):
            why = row if isinstance(row, str) else "not a Langfuse trace (no trace id and observations)"
            yield Read(number, error=f"value {line}: {why}")
            number += 1
            continue
        for found in trace_records(row, number, observation_record):
            yield found
            number = found.line + 1
