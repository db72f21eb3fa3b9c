"""Event streams: a logged stream of events becomes one transcript record per streamed response.

Pure functions over lines: `(number, raw bytes)` in, `(first line, record or error message)` out.
Two framings are read: server-sent events (`event:` / `data:` lines, a blank line ending each
event, `data: [DONE]` ending a stream) and JSON lines with one event per line. Two kinds of
stream are assembled:

- Responses API events (`response.created` … `response.completed`): the record is the terminal
  event's `response` (`response.completed`, `response.incomplete`, `response.failed`); an `error`
  event makes a failed response. A stream that ends without a terminal event (cut off) is rebuilt
  from `response.output_item.done` events, and from the deltas of items never finished, and is
  marked incomplete with the reason `stream_cut_off`. An `error` event fails the response it
  belongs to: the `response.failed` that may follow is the same response (one record), given
  the error event's code and message when it carries none of its own.
- Chat Completions chunks (`object: "chat.completion.chunk"`): the deltas of each choice are
  joined into one `chat.completion` (content, reasoning, tool calls, and the `citations` /
  `search_results` of search-augmented providers). Chunks are grouped by their `id`; a completion
  with no `finish_reason` when its stream ends gets `finish_reason: "stream_cut_off"`. Perplexity
  ends a stream with a `chat.completion.done` object: the end of that completion, its full
  message filling in what the deltas did not carry.

Memory holds the assembled state of the responses still open, never the events: in a sequential
stream that is one response at a time. Responses events carry no response id except on the
`response.*` lifecycle events, so other events go to the response last opened (or to the one a
`response_id` key names, which some loggers add). Each record's `metadata.stream` says where it was
read: its first and last line, the number of events, and the event that ended it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from tlmscore.ingest._chunks import CHAT_OBJECTS, CUT_OFF, Chat, Open, Out

_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
_SSE_FIELDS = (b"event:", b"data:", b"id:", b"retry:")
_BOM = b"\xef\xbb\xbf"

Line = tuple[int, bytes]


def is_sse_line(raw: bytes) -> bool:
    """Whether a line opens server-sent events (`event:` or `data:`)."""
    return raw.removeprefix(_BOM).lstrip().startswith((b"event:", b"data:"))


def is_event(obj: Any) -> bool:
    """Whether a parsed JSON value is a stream event: a Responses event or a Chat Completions chunk."""
    if not isinstance(obj, dict):
        return False
    if obj.get("object") in CHAT_OBJECTS:
        return True
    kind = obj.get("type")
    return isinstance(kind, str) and "sequence_number" in obj and (kind.startswith("response.") or kind == "error")


def _parse(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data.decode("utf-8"))  # the standard library's message for the error row


def sse_events(lines: Iterable[Line]) -> Iterator[tuple[int, Any]]:
    """The events of SSE text: `(first line, parsed data)`; `None` for `[DONE]`, a message for bad data.

    Each event's `data:` lines are joined by newlines, as the SSE format says; an `event:` name is
    put in as `type` when the data has none.
    """
    data: list[bytes] = []
    name: str | None = None
    first = 0
    for number, raw in lines:
        line = raw.removeprefix(_BOM).rstrip(b"\r\n")
        if not line.strip():
            if data:
                yield first, _sse_event(b"\n".join(data), name)
            data, name, first = [], None, 0
            continue
        if line.startswith(b":") or not line.startswith(_SSE_FIELDS):
            continue  # a comment (keep-alive), or a line that is no field of SSE
        first = first or number
        key, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if key == b"data":
            data.append(value)
        elif key == b"event":
            name = value.decode("utf-8", "replace").strip()
    if data:
        yield first, _sse_event(b"\n".join(data), name)


def _sse_event(data: bytes, name: str | None) -> Any:
    if data.strip() == b"[DONE]":
        return None
    try:
        event = _parse(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return f"invalid JSON in an event's data: {getattr(exc, 'msg', exc)}"
    if isinstance(event, dict) and name and "type" not in event and "object" not in event:
        event = {**event, "type": name}
    return event


def json_events(lines: Iterable[Line]) -> Iterator[tuple[int, Any]]:
    """The events of a JSON-lines stream: `(line, parsed event)`, a message for a line that is not JSON."""
    for number, raw in lines:
        if not raw.strip():
            continue
        try:
            yield number, _parse(raw.removeprefix(_BOM))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            yield number, f"invalid JSON: {getattr(exc, 'msg', exc)}"


# -- Responses events ------------------------------------------------------------------------------


def _part(item: dict[str, Any], index: Any) -> dict[str, Any]:
    """The content part `index` of an item being streamed, made when missing."""
    parts = item.setdefault("content", [])
    position = index if isinstance(index, int) and index >= 0 else len(parts)
    while len(parts) <= position:
        parts.append({"type": "output_text", "text": "", "annotations": []})
    part: dict[str, Any] = parts[position]
    return part


def _apply_delta(state: Open, event: dict[str, Any], kind: str) -> None:
    """An item-level event applied to the item it names (by `output_index`)."""
    index = event.get("output_index")
    if not isinstance(index, int):
        return
    if kind in ("response.output_item.added", "response.output_item.done"):
        if isinstance(event.get("item"), dict) and index not in state.done:
            state.items[index] = copy.deepcopy(event["item"])
        if kind == "response.output_item.done":
            state.done.add(index)
        return
    if index in state.done:
        return
    item = state.items.setdefault(index, {"type": "message", "role": "assistant", "content": []})
    if kind in ("response.content_part.added", "response.content_part.done") and isinstance(event.get("part"), dict):
        _part(item, event.get("content_index")).update(event["part"])
    elif kind in ("response.output_text.delta", "response.refusal.delta"):
        key = "text" if kind == "response.output_text.delta" else "refusal"
        part = _part(item, event.get("content_index"))
        part[key] = str(part.get(key) or "") + str(event.get("delta") or "")
    elif kind == "response.output_text.done" and isinstance(event.get("text"), str):
        _part(item, event.get("content_index"))["text"] = event["text"]
    elif kind == "response.output_text.annotation.added" and isinstance(event.get("annotation"), dict):
        _part(item, event.get("content_index")).setdefault("annotations", []).append(event["annotation"])
    elif kind == "response.function_call_arguments.delta":
        item["arguments"] = str(item.get("arguments") or "") + str(event.get("delta") or "")
    elif kind == "response.function_call_arguments.done" and isinstance(event.get("arguments"), str):
        item["arguments"] = event["arguments"]
    elif kind == "response.custom_tool_call_input.delta":
        item["input"] = str(item.get("input") or "") + str(event.get("delta") or "")


def _assembled_output(state: Open) -> list[dict[str, Any]]:
    """The items in output order; one never finished is marked incomplete."""
    output = []
    for index in sorted(state.items):
        item = state.items[index]
        if index not in state.done and item.get("status") in (None, "in_progress"):
            item = {**item, "status": "incomplete"}
        output.append(item)
    return output


def _responses_record(state: Open, terminal: dict[str, Any] | None, ended_by: str | None) -> dict[str, Any]:
    """The record of one streamed response: the terminal event's response, else the one rebuilt."""
    if terminal is not None:
        response = dict(terminal)
        if not response.get("output") and state.items:  # a logger that dropped the output from the final event
            response["output"] = _assembled_output(state)
        said = response.get("error")
        if state.error is not None and not (isinstance(said, dict) and (said.get("message") or said.get("code"))):
            response["error"] = state.error  # the error event said what the failed response does not
        return {"response": response, "metadata": state.meta(ended_by)}
    response = {"object": "response", **state.snapshot, "output": _assembled_output(state)}
    if ended_by == "error":
        response["status"] = "failed"
    else:
        response["status"] = "incomplete"
        response["incomplete_details"] = {"reason": CUT_OFF}
    return {"response": response, "metadata": state.meta(ended_by)}


def _error_of(event: dict[str, Any]) -> dict[str, Any]:
    """An `error` event's code and message: at the top level (the SDK's type) or in a nested `error`."""
    inner = event.get("error")
    found = inner if isinstance(inner, dict) else event
    error = {"code": found.get("code") or found.get("type"), "message": found.get("message")}
    return error if error["code"] or error["message"] else {"code": None, "message": "an error event with no message"}


class _Responses:
    """Responses events, assembled response by response."""

    def __init__(self) -> None:
        self.open: dict[str, Open] = {}
        self.current: str | None = None
        self.unnamed = 0

    def _key(self, event: dict[str, Any], line: int) -> str:
        response = event.get("response")
        rid = event.get("response_id") or (response.get("id") if isinstance(response, dict) else None)
        if isinstance(rid, str) and rid:
            return rid
        if self.current is not None and self.current in self.open:
            return self.current
        self.unnamed += 1
        return f"\0{self.unnamed}:{line}"

    def add(self, line: int, event: dict[str, Any]) -> Iterator[Out]:
        kind = str(event.get("type"))
        key = self._key(event, line)
        if kind == "response.created" and "response_id" not in event and self.current in self.open \
                and self.current != key:  # streams without ids are sequential: the one open was cut off
            yield from self.close(str(self.current))
        state = self.open.setdefault(key, Open(first=line))
        self.current = key
        state.seen(line)
        response = event.get("response")
        if isinstance(response, dict) and kind not in _TERMINAL:
            state.snapshot.update({k: v for k, v in response.items() if k != "output"})
        if kind in _TERMINAL:
            del self.open[key]
            terminal = response if isinstance(response, dict) else {**state.snapshot, "status": kind.rsplit(".", 1)[-1]}
            yield state.first, _responses_record(state, terminal, kind)
        elif kind == "error":  # the response failed: its `response.failed`, if one follows, ends it
            state.error = _error_of(event)
            state.snapshot["error"] = state.error
        else:
            _apply_delta(state, event, kind)

    def close(self, key: str) -> Iterator[Out]:
        state = self.open.pop(key)
        yield state.first, _responses_record(state, None, "error" if state.error is not None else None)


def assemble(events: Iterable[tuple[int, Any]]) -> Iterator[Out]:
    """Records from events, in the order their streams began; a value that is no event is its own error.

    `None` (SSE's `[DONE]`) ends the chat completions open at that point.
    """
    responses, chat = _Responses(), Chat()
    pending: list[Out] = []
    for line, event in events:
        if isinstance(event, str):
            pending.append((line, event))
        elif event is None:
            for key in list(chat.open):
                pending.extend(chat.close(key, "[DONE]"))
        elif isinstance(event, dict) and event.get("object") in CHAT_OBJECTS:
            pending.extend(chat.add(line, event))
        elif is_event(event) or (isinstance(event, dict) and str(event.get("type", "")).startswith("response.")):
            pending.extend(responses.add(line, event))
        else:
            pending.append((line, "not a stream event (a Responses event or a chat.completion.chunk) "
                                  "in a file read as an event stream"))
        if pending:
            yield from _in_order(pending, responses, chat)
    for key in list(responses.open):
        pending.extend(responses.close(key))
    for key in list(chat.open):
        pending.extend(chat.close(key, None))
    yield from _in_order(pending, responses, chat)  # every stream closed: all of them, in order


def _in_order(pending: list[Out], responses: _Responses, chat: Chat) -> Iterator[Out]:
    """The finished outputs that no open stream began before: records come out in order of first line."""
    opened = [s.first for s in (*responses.open.values(), *chat.open.values())]
    limit = min(opened) if opened else None
    pending.sort(key=lambda out: out[0])
    ready = [out for out in pending if limit is None or out[0] < limit]
    del pending[: len(ready)]
    yield from ready


def stream_records(lines: Iterable[Line], *, sse: bool) -> Iterator[Out]:
    """The records of a stream file's lines (`sse`: server-sent events, else JSON lines of events)."""
    return assemble(sse_events(lines) if sse else json_events(lines))
