"""The status of a logged response, read from the record itself: `completed`, `incomplete:<reason>`, ...

Decided once as ingest reads the record (`with_status`), carried on the `Transcript`, only read later:
the `response_status` column and `ScoringInput.status`. Rows with no answer are error rows that keep
the API's error code and message; cut-short answers are scored, with a warning.

- `completed`: `status: "completed"` (or none logged) with an answer; Chat `finish_reason`
  `stop`, `tool_calls`, `function_call` (and the `end_turn`/`stop_sequence`/`eos` of compatible servers).
- `incomplete:<reason>` (scored, warned): `incomplete_details.reason` as logged (`max_output_tokens`,
  `content_filter`, `max_messages`, `steered`); Chat `finish_reason` `length` is `max_output_tokens`
  (the same cause, one name for scorers), `content_filter` is `content_filter`; a completed
  response with only reasoning whose `usage.output_tokens` reached `max_output_tokens` is
  `max_output_tokens`; `empty_output` when `output` is empty; `no_answer` when there is no answer
  text or call (only reasoning, tool items such as a generated image, empty or `<think>`-only text);
  `stream_cut_off` when a logged event stream ends before its response (Chat: before a `finish_reason`);
  `unknown` when the response (or, with no response status logged, its message) is marked
  incomplete without a reason.
- `failed` (error row): `status: "failed"` with its `error`; an API error object or a failed Batch
  API line logged instead of a response; Chat `finish_reason: "error"`.
- `queued`, `in_progress`, `cancelled` (error row): a background response logged unfinished.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tlmscore._content import content_text
from tlmscore._think import split_think
from tlmscore.model import ResponseStatus, Transcript, item_type

COMPLETED = "completed"
_UNFINISHED = {
    "queued": "the response is still queued (a background response logged before it ran); it has no answer yet",
    "in_progress": "the response is still in progress (a background response logged before it finished); "
                   "it has no answer yet",
    "cancelled": "the response was cancelled before it finished; it has no answer to score",
}
_REASONS = {
    "max_output_tokens": "the answer was cut off at the output token limit",
    "content_filter": "the answer was cut off by the provider's content filter",
    "max_messages": "the response stopped at the message limit",
    "steered": "the response stopped early to take new input (steered)",
    "empty_output": "the response's output is empty: there is no answer",
    "no_answer": "there is no answer text: the output holds only reasoning, tool items or empty text",
    "unknown": "the response stopped early and no reason was logged",
    "stream_cut_off": "the logged event stream ends before the response did: the answer is what was streamed "
                      "up to there",
}
# Chat Completions `finish_reason` values (OpenAI's and those of OpenAI-compatible servers).
_CHAT_DONE = frozenset({"stop", "tool_calls", "function_call", "end_turn", "stop_sequence", "eos"})
_CHAT_REASONS = {"length": "max_output_tokens", "max_tokens": "max_output_tokens", "model_length": "max_output_tokens",
                 "content_filter": "content_filter", "stream_cut_off": "stream_cut_off"}
# Output items that answer (the built-in converters of kind "answer"); reasoning, a search, a code run do not.
ANSWER_ITEMS = frozenset({"message", "function_call", "custom_tool_call", "computer_call", "local_shell_call",
                          "shell_call", "apply_patch_call", "mcp_approval_request", "tool_search_call", "program"})


def _name(value: Any) -> str | None:
    """A status or reason as logged: a string, else None (schema drift must not break a row)."""
    return value if isinstance(value, str) and value else None


def _incomplete(reason: str, source: str, *, empty: bool = False) -> ResponseStatus:
    why = _REASONS.get(reason, f"the response stopped early ({reason})")
    if empty and reason not in ("empty_output", "no_answer"):
        why += "; nothing but reasoning (or empty text) was output, so there is no answer"
    return ResponseStatus(f"incomplete:{reason}", warning=f"response is incomplete ({reason}, from {source}): {why}")


def error_detail(error: Any) -> str:
    """An API error object as `code: message` (the code, else the type; the object itself if neither)."""
    if not isinstance(error, Mapping):
        return str(error)
    code = error.get("code") or error.get("type")
    message = error.get("message")
    if code and message:
        return f"{code}: {message}"
    return str(message or code or dict(error))


def _answer_texts(output: list[Any]) -> list[str] | None:
    """The texts of the messages of `output`; None when a call answers (its arguments are an answer)."""
    texts: list[str] = []
    for item in output:
        kind = item_type(item)
        if kind == "message" and isinstance(item, dict):
            texts.append(content_text(item.get("content")))
        elif kind in ANSWER_ITEMS:
            return None
    return texts


def _no_answer(texts: list[str] | None) -> bool:
    return texts is not None and not any(split_think(t).text.strip() for t in texts)


def _used_every_token(response: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    usage = response.get("usage")
    limit = response.get("max_output_tokens") or request.get("max_output_tokens")
    used = usage.get("output_tokens") if isinstance(usage, Mapping) else None
    return isinstance(limit, int) and isinstance(used, int) and used >= limit


def _unfinished(status: str, response: Mapping[str, Any]) -> ResponseStatus:
    """A failed, queued, in-progress or cancelled response: no answer, the API's error when it gave one."""
    if status != "failed":
        return ResponseStatus(status, error=_UNFINISHED[status])
    error = response.get("error")
    return ResponseStatus("failed", error=f"response failed: {error_detail(error)}" if error
                          else "response failed, with no error recorded")


def _stopped_early(status: str | None, response: Mapping[str, Any], output: Any) -> tuple[str, str] | None:
    """(reason, where it was read) when the response says it stopped early, else None."""
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = _name(details.get("reason")) if isinstance(details, Mapping) else None
        return reason or "unknown", "incomplete_details.reason"
    if status is None and isinstance(output, list) and any(
            isinstance(item, dict) and item_type(item) == "message" and item.get("status") == "incomplete"
            for item in output):  # no response status logged (assembled from a stream): the message's own
        return "unknown", "output message status"
    return None


def _responses_status(response: Mapping[str, Any], request: Mapping[str, Any]) -> ResponseStatus:
    status = _name(response.get("status"))
    if status == "failed" or status in _UNFINISHED:
        return _unfinished(status, response)
    output = response.get("output")
    texts = _answer_texts(output) if isinstance(output, list) else []
    stopped = _stopped_early(status, response, output)
    if stopped is not None:
        return _incomplete(*stopped, empty=_no_answer(texts))
    if _no_answer(texts):
        if _used_every_token(response, request):
            return _incomplete("max_output_tokens", "usage.output_tokens", empty=True)
        return _incomplete("no_answer" if output else "empty_output", f"status {status}" if status else "no status")
    return ResponseStatus(COMPLETED)


def _chat_status(response: Mapping[str, Any]) -> ResponseStatus:
    choices = response.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else {}
    reason = _name(choice.get("finish_reason"))
    if reason == "error" or isinstance(choice.get("error"), Mapping):
        detail = error_detail(choice["error"]) if choice.get("error") else "finish_reason error"
        return ResponseStatus("failed", error=f"response failed: {detail}")
    message = choice.get("message")
    message = message if isinstance(message, Mapping) else {}
    calls = bool(message.get("tool_calls") or message.get("function_call") or message.get("refusal"))
    empty = not calls and _no_answer([content_text(message.get("content"))])
    if reason in _CHAT_REASONS:
        return _incomplete(_CHAT_REASONS[reason], f"finish_reason {reason}", empty=empty)
    if empty:
        return _incomplete("no_answer", f"finish_reason {reason}" if reason else "no finish_reason")
    if reason is not None and reason not in _CHAT_DONE:
        return ResponseStatus(COMPLETED, warning=f"unrecognised finish_reason {reason!r}; taken as completed")
    return ResponseStatus(COMPLETED)


def response_status(response: Mapping[str, Any], request: Mapping[str, Any] | None = None,
                    fmt: str = "responses") -> ResponseStatus:
    """The status of a Responses API response (`fmt="responses"`) or a chat completion (`"chat"`).

    `request` (the logged request kwargs) supplies `max_output_tokens` when the response lacks it.
    """
    if fmt == "chat":
        return _chat_status(response)
    return _responses_status(response, request or {})


def _batch_status(record: Mapping[str, Any]) -> ResponseStatus | None:
    """A Batch API output line: its `error`, or its HTTP status and the body's `error`."""
    batch = record.get("response")
    body = batch.get("body") if isinstance(batch, Mapping) else None
    code = batch.get("status_code") if isinstance(batch, Mapping) else None
    if isinstance(record.get("error"), Mapping):
        detail = error_detail(record["error"])
    elif code not in (None, 200):
        inner = body.get("error") if isinstance(body, Mapping) else None
        detail = f"HTTP {code}" + (f", {error_detail(inner)}" if inner else "")
        if isinstance(body, str) and body.strip():  # a gateway's plain-text error body
            detail += f", {body.strip()[:500]}"
    elif isinstance(body, Mapping):
        return record_status(body)
    else:
        return None
    return ResponseStatus("failed", error=f"batch request {record.get('custom_id')!r} failed: {detail}")


def record_status(record: Any) -> ResponseStatus | None:
    """The status of a record ingest could not read as a response, when the record says what went wrong.

    An API error object logged in place of a response (`{"error": {...}}`), a failed Batch API
    output line, and a failed or unfinished Response (which may lack `output`) are `failed`, `queued`,
    `in_progress` or `cancelled` with the API's code and message; anything else is None (unknown).
    """
    if not isinstance(record, Mapping):
        return None
    if "custom_id" in record and ("response" in record or "error" in record):
        return _batch_status(record)
    if isinstance(record.get("response"), Mapping):
        return record_status(record["response"])
    if _name(record.get("status")) in ("failed", *_UNFINISHED):
        return _responses_status(record, {})
    if isinstance(record.get("error"), Mapping) and "output" not in record and not record.get("choices"):
        return ResponseStatus("failed", error=f"record is an API error, not a response: "
                                             f"{error_detail(record['error'])}")
    return None


def with_status(transcript: Transcript) -> Transcript:
    """A transcript just read, with its status (for an unreadable record, what the record says went wrong).

    A status with no answer has the row's error, placed (an unreadable record's `error` too). The
    status stays None when not known: an unforeseen shape leaves it unknown; the record keeps its row.
    """
    try:
        status = record_status(transcript.raw) if transcript.error is not None else \
            response_status(transcript.response, transcript.request, transcript.fmt)
    except Exception:  # noqa: BLE001  (a status is a help, never a reason to lose the record)
        return transcript
    if status is not None and status.error is not None:  # the row's error, with the record's place
        status = replace(status, error=f"{transcript.source}:{transcript.line}: {status.error}")
        transcript = replace(transcript, error=status.error if transcript.error is not None else None)
    return replace(transcript, status=status)
