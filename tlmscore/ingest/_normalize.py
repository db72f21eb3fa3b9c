"""One record as a `Transcript`: the record formats, read leniently.

A wrapper of request and response, a Batch API output line, a bare Response, a Chat Completions
record; a record that cannot be used is an error transcript, still one row.
"""

from __future__ import annotations

from typing import Any

from tlmscore._contract import stored_id
from tlmscore.errors import TranscriptError
from tlmscore.ingest._batch_api import BatchInputs
from tlmscore.ingest._status import with_status
from tlmscore.model import Transcript

SOURCE_ERROR = "source_error"
"""Key of a record a source reader found but could not read (its origin kept): the message of its error row."""


def _plain(obj: Any) -> Any:
    """SDK objects (pydantic models) as plain JSON-like dicts; anything else unchanged."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, type):
        return dump(mode="json", exclude_unset=True)
    return obj


def _api_error(record: dict[str, Any]) -> str | None:
    """The message of an API error object logged in place of a response, if that is what it is."""
    error = record.get("error")
    if isinstance(error, dict) and "output" not in record and "choices" not in record:
        return f"record is an API error, not a response: {error.get('message') or error}"
    return None


def _response_kind(response: dict[str, Any]) -> str:
    if response.get("object") == "chat.completion" or ("choices" in response and "output" not in response):
        return "chat"
    return "responses"


def _check_response(response: dict[str, Any], kind: str) -> None:
    if kind == "chat":
        choices = response.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise TranscriptError("chat completion has no choices")
        return
    if "output" not in response:
        raise TranscriptError("response has no 'output'")
    output = response["output"]
    if not isinstance(output, list):
        raise TranscriptError(f"response.output must be a list, not {type(output).__name__}")
    for i, item in enumerate(output):
        if not isinstance(item, dict):
            raise TranscriptError(f"response.output[{i}] is not an object")
        if not isinstance(item.get("type"), str):
            raise TranscriptError(f"response.output[{i}] has no 'type'")


def _unwrap(record: dict[str, Any],
            inputs: BatchInputs | None = None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(request, response, metadata) from any supported record shape.

    A Batch API output line gets its request from the batch input files when they are given.
    """
    message = _api_error(record)
    if message:
        raise TranscriptError(message)
    if "custom_id" in record and isinstance(record.get("response"), dict) and "body" in record["response"]:
        batch = record["response"]
        body = _plain(batch.get("body") or {})
        if batch.get("status_code") not in (None, 200) or record.get("error"):
            detail = record.get("error") or batch.get("status_code")  # a failed code is worded by its status
            raise TranscriptError(f"batch request {record['custom_id']!r} failed: {detail}")
        if not isinstance(body, dict):
            raise TranscriptError(f"batch response body must be an object, not {type(body).__name__}")
        custom_id = str(record["custom_id"])
        request = inputs.request(custom_id) if inputs is not None else None
        return request or {}, body, {"custom_id": custom_id}
    if "response" in record or "request" in record:
        request, response = record.get("request", {}), _plain(record.get("response"))
        if not isinstance(request, dict):
            raise TranscriptError(f"'request' must be an object, not {type(request).__name__}")
        if not isinstance(response, dict):
            raise TranscriptError("record has no 'response' object")
        metadata = record.get("metadata") or {}
        return request, response, metadata if isinstance(metadata, dict) else {"value": metadata}
    return {}, record, {}


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def _origin(record: dict[str, Any]) -> dict[str, Any]:
    """The origin fields a source put on a record (`origin`, `trace_id`, `span_id`, `warnings`)."""
    if not any(key in record for key in ("origin", "trace_id", "span_id", "warnings")):
        return {}
    notes = record.get("warnings")
    warnings = tuple(str(w) for w in notes) if isinstance(notes, list) else ()
    return {"origin": _text(record.get("origin")), "trace_id": _text(record.get("trace_id")),
            "span_id": _text(record.get("span_id")), "warnings": warnings}


def _unread(record: dict[str, Any], stored: str | None, source: str, line: int) -> str | None:
    """The error of a record that holds no call: a source's error (`source_error`), or only a response id."""
    if isinstance(record.get(SOURCE_ERROR), str):  # a call a source found but could not read
        return f"{source}:{line}: {record[SOURCE_ERROR]}"
    if stored is not None:
        return (f"{source}:{line}: the record holds only the response id {stored}, not the call; "
                "--hydrate pulls the stored response")
    return None


def normalize_record(obj: Any, *, source: str, line: int, batch: BatchInputs | None = None) -> Transcript:
    """One record as a `Transcript`, with its status; a record that cannot be used becomes an error transcript."""
    return with_status(_read(obj, source, line, batch))


def _read(obj: Any, source: str, line: int, batch: BatchInputs | None) -> Transcript:
    rid = f"{source}:{line}"
    try:
        record = _plain(obj)
    except Exception as exc:  # noqa: BLE001  (an SDK object that cannot be dumped is this record's error)
        return Transcript(id=rid, source=source, line=line, raw=obj,
                          error=f"{rid}: record could not be read: {type(exc).__name__}: {exc}")
    if not isinstance(record, dict):
        return Transcript(id=rid, source=source, line=line, raw=record,
                          error=f"{rid}: record must be a JSON object, not {type(record).__name__}")
    stored = stored_id(record)
    if isinstance(record.get("id"), (str, int)) and ("response" in record or "request" in record or stored
                                                     or SOURCE_ERROR in record):
        rid = str(record["id"])
    origin = _origin(record)
    error = _unread(record, stored, source, line)
    if error is None:
        try:
            request, response, metadata = _unwrap(record, batch)
            kind = _response_kind(response)
            _check_response(response, kind)
        except TranscriptError as exc:
            error = f"{source}:{line}: {exc.reason}"
        except Exception as exc:  # noqa: BLE001  (a record of a shape nobody foresaw is its own error row)
            error = f"{source}:{line}: unreadable record: {type(exc).__name__}: {exc}"
        else:
            return Transcript(id=rid, source=source, line=line, request=request, response=response,
                              metadata=metadata, raw=record, fmt="chat" if kind == "chat" else "responses", **origin)
    return Transcript(id=rid, source=source, line=line, raw=record, error=error, **origin)
