"""OpenInference spans (Arize Phoenix): exports of `get_spans_dataframe()` and a live server's spans.

An LLM span of the OpenAI instrumentation holds the request kwargs in `input.value` and the
`Response` (or Chat Completion) in `output.value`, both JSON: those are the record. Where the
output is not there as JSON (a streamed call, another instrumentation), the record is rebuilt
as a Chat Completions call from the flattened `llm.input_messages` / `llm.output_messages`, and
its warning says what that loses. Values the instrumentation redacted (`__REDACTED__`: images it
hides or finds too long) are named in a warning. Other spans of a trace (chains, tools,
retrievers) are no records.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tlmscore._tables import json_cell, rows, table_kind
from tlmscore.stores.reading import Peek, Read, SourceReader, texts

__all__ = ["READER", "detect", "read", "span_record", "spans_records"]

ORIGIN = "openinference"
REDACTED = "__REDACTED__"
_LOST = ("built from llm.input_messages and llm.output_messages, as output.value holds no response: "
         "built-in tool calls and their results (web and file search sources, code outputs) and "
         "citations are not in them")


def flat(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A span with nested objects (`{"context": {"span_id"}}`) as dotted keys (`context.span_id`)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def _kind(span: Mapping[str, Any]) -> str | None:
    value = span.get("span_kind") or span.get("attributes.openinference.span.kind")
    return str(value).upper() if value is not None else None


def detect(sample: Peek) -> bool:
    """A table whose first row is an OpenInference span: a span id and a span kind."""
    row = flat(sample.first)
    return "context.span_id" in row and _kind(row) is not None


def _is_response(value: Any) -> bool:
    return isinstance(value, dict) and ("output" in value or "choices" in value)


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A flattened OpenInference message as a Chat Completions message."""
    m = {k.removeprefix("message."): v for k, v in message.items()}
    out: dict[str, Any] = {"role": m.get("role") or "user"}
    content = m.get("content")
    if content is None and isinstance(m.get("contents"), list):
        content = "".join(str(c.get("message_content.text") or "") for c in m["contents"] if isinstance(c, dict))
    out["content"] = content
    out.update({key: m[key] for key in ("name", "tool_call_id") if m.get(key)})
    calls = [c for c in m.get("tool_calls") or [] if isinstance(c, dict)]
    if calls:
        out["tool_calls"] = [{"id": c.get("tool_call.id") or f"call_{i}", "type": "function",
                              "function": {"name": c.get("tool_call.function.name"),
                                           "arguments": c.get("tool_call.function.arguments") or "{}"}}
                             for i, c in enumerate(calls)]
    return out


def _messages(value: Any) -> list[dict[str, Any]] | None:
    value = json_cell(value)
    if not isinstance(value, list):
        return None
    return [_message(flat(m)) for m in value if isinstance(m, Mapping)]


def _rebuilt(span: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(request, response) of a Chat Completions call from the span's flattened messages."""
    inputs = _messages(span.get("attributes.llm.input_messages"))
    outputs = _messages(span.get("attributes.llm.output_messages"))
    if not inputs or not outputs:
        raise ValueError("LLM span has no JSON response in output.value and no llm.input_messages "
                         "and llm.output_messages to rebuild it from")
    model = span.get("attributes.llm.model_name")
    request = {"model": model, "messages": inputs}
    reason = span.get("attributes.llm.finish_reason") or "stop"
    response = {"object": "chat.completion", "model": model,
                "choices": [{"index": 0, "message": outputs[0], "finish_reason": reason}]}
    return request, response


def span_record(span: Mapping[str, Any], origin: str = ORIGIN) -> dict[str, Any] | None:
    """The transcript record of a flattened LLM span; None for a span of another kind.

    Raises `ValueError` for an LLM span that holds no call to read.
    """
    if _kind(span) != "LLM":
        return None
    if str(span.get("status_code") or "").upper() == "ERROR" and span.get("attributes.output.value") is None:
        raise ValueError(f"the LLM call failed: {span.get('status_message') or 'status ERROR'}")
    request, response = json_cell(span.get("attributes.input.value")), json_cell(span.get("attributes.output.value"))
    warnings: list[str] = []
    if not (_is_response(response) and isinstance(request, dict)):
        if _is_response(response):
            request = {"model": span.get("attributes.llm.model_name"),
                       "messages": _messages(span.get("attributes.llm.input_messages")) or []}
            warnings.append("the request was rebuilt from llm.input_messages (input.value is not JSON)")
        else:
            request, response = _rebuilt(span)
            warnings.append(_LOST)
    hidden = sum(text == REDACTED for text in texts(request))  # images it hides or finds too long
    if hidden:
        warnings.append(f"the instrumentation redacted {hidden} value(s) of the request ({REDACTED}: images it hides "
                        "or finds longer than OPENINFERENCE_BASE64_IMAGE_MAX_LENGTH): shown as redacted, not as sent")
    metadata = {"span_name": span.get("name"), "start_time": span.get("start_time"),
                "end_time": span.get("end_time"), "parent_id": span.get("parent_id")}
    return {"id": str(span.get("context.span_id")), "request": request, "response": response,
            "metadata": {k: v for k, v in metadata.items() if v is not None}, "origin": origin,
            "trace_id": span.get("context.trace_id"), "span_id": span.get("context.span_id"),
            "warnings": warnings}


def spans_records(spans: Iterator[tuple[int, dict[str, Any] | str]], origin: str = ORIGIN) -> Iterator[Read]:
    """The records of numbered spans (rows or messages saying why a row is not one), LLM spans only."""
    for number, row in spans:
        if isinstance(row, str):
            yield Read(number, error=row)
            continue
        try:
            record = span_record(flat(row), origin)
        except (ValueError, TypeError, AttributeError) as exc:
            span_id = flat(row).get("context.span_id")
            yield Read(number, error=f"span {span_id}: {exc}" if span_id else str(exc))
            continue
        if record is not None:
            yield Read(number, record)


def read(address: str) -> Iterator[Read]:
    """The LLM spans of an export file, in the file's order."""
    path = Path(address)
    yield from spans_records(rows(path, table_kind(path) or "jsonl"))


READER = SourceReader(
    "openinference", detect, read,
    wants="`context.span_id` and an OpenInference span kind (`span_kind`, `attributes.openinference…`)")
"""OpenInference span exports (Phoenix's, or any file of such spans)."""
