"""Langfuse observation exports: generations of the OpenAI integration become records.

Read: the blob-storage export (`observations/` and `observations_v2/`: Parquet, JSON lines, JSON or
CSV, snake_case columns such as `trace_id`, `provided_model_name`, `model_parameters`) and the UI or
API export (camelCase: `traceId`, `model`, `modelParameters`). A `GENERATION` observation is a
record; spans, events, tools and the other types are not.

Langfuse's OpenAI integration (`langfuse.openai`) keeps less than the call: `input` is the request's
input with `instructions` folded in as a leading system message (or `{"instructions", "input",
"tools", …}`, or for Chat Completions the messages, with `tools` beside them), and `output` is the
Response's `output` (one item unwrapped) or the chat message. A streamed Responses call also keeps
the Response's other fields in `metadata`. The call is rebuilt from those; what the observation
does not hold (the response's id and status, a chat completion's finish reason and provider fields,
base64 media, which the SDK uploads apart and replaces by a `@@@langfuseMedia:…@@@` reference) is
named in the record's warnings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tlmscore.sources._genai import as_value
from tlmscore.sources._tables import Peek, Read, read_rows, rows, table_kind

ORIGIN = "langfuse"
_TYPES = frozenset({"SPAN", "GENERATION", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR",
                    "EMBEDDING", "GUARDRAIL"})
_PAIR = 2  # a Parquet map cell reads as (key, value) pairs
_PROMPT_KEYS = frozenset({"input", "instructions", "tools", "tool_choice", "parallel_tool_calls"})
_FOLDED = ("instructions: Langfuse folds them into the input as its leading system message, "
           "read back as that message")
_RESPONSE_LOST = ("Langfuse keeps only the Response's output: its id, status (read as completed), "
                  "incomplete_details and the tools it echoes are lost (only the request's tools are declared)")
_CHAT_LOST = ("Langfuse keeps only the chat completion's message: its id, finish_reason (read as stop) "
              "and provider fields (citations, search_results) are lost")
_STREAMED_CHAT_LOST = ("Langfuse keeps only the streamed chat completion's message and finish_reason: its id "
                       "and provider fields (citations, search_results) are lost")
_MEDIA = re.compile(r"@@@langfuseMedia:type=([^|@]*)\|id=([^|@]*)\|source=[^|@]*@@@")
"""A Langfuse SDK's media reference, in place of base64 data it uploads apart (Langfuse's multi-modality docs)."""


def _get(row: Mapping[str, Any], *names: str) -> Any:
    """The first of `names` the row holds a value for (exports spell a column two ways)."""
    for name in names:
        value = row.get(name)
        if value is not None and value != "":
            return value
    return None


def _json(value: Any) -> Any:
    """A cell that holds JSON text, parsed; plain text or anything else as it is; "" (not set) as None."""
    return None if value == "" else as_value(value)


def is_observation(row: Mapping[str, Any]) -> bool:
    """Whether a row is a Langfuse observation: an id, a trace id and an observation type."""
    kind = row.get("type")
    return (isinstance(kind, str) and kind.upper() in _TYPES and row.get("id") is not None
            and _get(row, "trace_id", "traceId") is not None)


def detect(sample: Peek) -> bool:
    """A table whose first row is a Langfuse observation."""
    return is_observation(sample.first)


def _metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    """The observation's metadata: an object, JSON text, or a Parquet map's (key, value) pairs."""
    value = _json(row.get("metadata"))
    if isinstance(value, list):
        value = {pair[0]: pair[1] for pair in value if isinstance(pair, (list, tuple)) and len(pair) == _PAIR}
    return {str(k): _json(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _is_chat(output: Any, prompt: Any) -> bool:
    """A Chat Completions call: its output is a message (or several, or streamed text) without an item type."""
    if isinstance(output, str):  # a streamed chat call's text: a Response's output is always items
        return True
    if isinstance(output, Mapping):
        return "type" not in output and "role" in output
    if isinstance(output, list) and output:
        return all(isinstance(o, Mapping) and "type" not in o and "role" in o for o in output)
    if isinstance(prompt, Mapping):
        return "messages" in prompt
    return False


def _responses_request(prompt: Any, model: Any) -> tuple[dict[str, Any], list[str]]:
    request: dict[str, Any] = {"model": model}
    fields = dict(prompt) if isinstance(prompt, Mapping) and set(prompt) <= _PROMPT_KEYS else None
    if fields is None:
        request["input"] = prompt if prompt is not None else []
    else:
        request.update({k: v for k, v in fields.items() if v is not None})
        request.setdefault("input", [])
    first = request["input"][0] if isinstance(request["input"], list) and request["input"] else None
    folded = isinstance(first, Mapping) and first.get("role") == "system" and "instructions" not in request
    return request, [_FOLDED] if folded else []


def _media_lost(*values: Any) -> list[str]:
    """A warning naming the media references among `values` (nested JSON): their data is not in the export."""
    found: list[str] = []
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found += [f"{kind} {mid}" for kind, mid in _MEDIA.findall(value)]
        elif isinstance(value, Mapping):
            stack += list(value.values())
        elif isinstance(value, list):
            stack += value
    if not found:
        return []
    return [f"Langfuse keeps base64 media apart from the export: {len(found)} media reference(s) "
            f"({', '.join(sorted(found))}) stand where the data was, and its content is lost"]


def _unfold(request: dict[str, Any], instructions: Any, warnings: list[str]) -> list[str]:
    """The request with its instructions back out of the input, when the Response's own say which they were."""
    items = request.get("input")
    if not isinstance(items, list) or not items or not instructions or "instructions" in request:
        return warnings
    first = items[0]
    if isinstance(first, Mapping) and first.get("role") == "system" and first.get("content") == instructions:
        request["input"] = items[1:]
        request["instructions"] = instructions
        return [w for w in warnings if w != _FOLDED]
    return warnings


def _responses_call(prompt: Any, output: Any, model: Any,
                    meta: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    request, warnings = _responses_request(prompt, model)
    items = output if isinstance(output, list) else [output] if isinstance(output, Mapping) else []
    response: dict[str, Any] = {"object": "response", "model": model, "output": items}
    if meta.get("object") == "response":  # a streamed call: the Response's other fields are in the metadata
        response.update({k: meta.get(k) for k in ("id", "status", "incomplete_details", "error") if k in meta})
        warnings = _unfold(request, meta.get("instructions"), warnings)
        for key in ("tools", "previous_response_id"):
            if meta.get(key) and key not in request:
                request[key] = meta[key]
    else:
        response["status"] = "completed"
        warnings.append(_RESPONSE_LOST)
    return request, response, warnings


def _chat_call(prompt: Any, output: Any, model: Any,
               meta: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    request: dict[str, Any] = {"model": model}
    if isinstance(prompt, Mapping):
        request.update({k: v for k, v in prompt.items() if v is not None})
    else:
        request["messages"] = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
    messages = output if isinstance(output, list) else [output]
    reason = meta.get("finish_reason") or "stop"  # a streamed call keeps its finish reason in the metadata
    choices = [{"index": i, "finish_reason": reason,
                "message": dict(m) if isinstance(m, Mapping) else {"role": "assistant", "content": m}}
               for i, m in enumerate(messages)]
    response = {"object": "chat.completion", "model": model, "choices": choices}
    return request, response, [_STREAMED_CHAT_LOST if meta.get("finish_reason") else _CHAT_LOST]


def observation_record(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The transcript record of a generation observation; None for another type.

    Raises `ValueError` for a generation that holds no call to read.
    """
    if str(row.get("type") or "").upper() != "GENERATION":
        return None
    prompt, output = _json(row.get("input")), _json(row.get("output"))
    if isinstance(row.get("input"), str) and not isinstance(prompt, (str, list, dict)):
        prompt = row["input"]  # a text input stored as it is that happens to read as a JSON number or literal
    if output is None:
        message = _get(row, "status_message", "statusMessage")
        failed = str(row.get("level") or "").upper() == "ERROR"
        raise ValueError(f"the LLM call failed: {message or 'level ERROR'}" if failed
                         else "the generation has no output")
    if prompt is None:
        raise ValueError("the generation has no input")
    model = _get(row, "provided_model_name", "providedModelName", "model")
    meta = _metadata(row)
    build = _chat_call if _is_chat(output, prompt) else _responses_call
    request, response, warnings = build(prompt, output, model, meta)
    warnings += _media_lost(prompt, output)
    oid = str(row.get("id"))
    extra = {"name": row.get("name"), "start_time": _get(row, "start_time", "startTime"),
             "parent_observation_id": _get(row, "parent_observation_id", "parentObservationId"),
             "model_parameters": _json(_get(row, "model_parameters", "modelParameters"))}
    return {"id": oid, "request": request, "response": response, "origin": ORIGIN,
            "trace_id": str(_get(row, "trace_id", "traceId")), "span_id": oid,
            "metadata": {k: v for k, v in extra.items() if v is not None}, "warnings": warnings}


def observations_records(numbered: Iterator[tuple[int, dict[str, Any] | str]]) -> Iterator[Read]:
    """The records of numbered observation rows (or messages saying why a row is not one)."""
    return read_rows(numbered, observation_record, "observation")


def read(address: str) -> Iterator[Read]:
    """The generations of an observation export, in the file's order."""
    path = Path(address)
    yield from observations_records(rows(path, table_kind(path) or "jsonl"))
