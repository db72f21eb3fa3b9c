"""Chat Completions chunk streams joined into completions, and the state every stream assembly keeps.

Part of reading event streams (`tlmscore.ingest._streams`): the deltas of each choice are joined
into one `chat.completion` (content, reasoning, tool calls, and the `citations` / `search_results`
of search-augmented providers). Chunks are grouped by their `id`; a completion with no
`finish_reason` when its stream ends gets `finish_reason: "stream_cut_off"`. A `chat.completion.done`
object (Perplexity's last event) ends its completion: its full message fills in what the deltas
did not carry, and its top-level fields (citations, search results, usage) are kept.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

CUT_OFF = "stream_cut_off"
"""The incomplete reason (Responses) and `finish_reason` (Chat) of a stream that ends before its response."""
DONE = "chat.completion.done"
CHAT_OBJECTS = ("chat.completion.chunk", DONE)
"""The objects of a Chat Completions stream: its chunks, and Perplexity's closing object."""
Out = tuple[int, "dict[str, Any] | str"]
"""A record (a dict) or the error message of a line that could not be read, at its (first) line."""


@dataclass
class Open:
    """What is known so far of one streamed response (Responses events) or completion (Chat chunks)."""

    first: int
    last: int = 0
    events: int = 0
    snapshot: dict[str, Any] = field(default_factory=dict)
    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)
    choices: dict[int, dict[str, Any]] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    """An `error` event's code and message: the response failed."""

    def seen(self, line: int) -> None:
        self.last = max(self.last, line)
        self.events += 1

    def meta(self, ended_by: str | None) -> dict[str, Any]:
        return {"stream": {"first_line": self.first, "last_line": self.last, "events": self.events,
                           "ended_by": ended_by}}


def _join_content(message: dict[str, Any], content: Any) -> None:
    """A delta's content added to the message's: text to text; a list of parts (Mistral) part by part."""
    if content is None or content == "":
        return
    have = message.get("content")
    if isinstance(content, str) and (have is None or isinstance(have, str)):
        message["content"] = (have or "") + content
        return
    parts: list[Any] = [{"type": "text", "text": have}] if isinstance(have, str) and have else list(have or [])
    for part in content if isinstance(content, list) else [{"type": "text", "text": str(content)}]:
        last = parts[-1] if parts else None
        if isinstance(part, dict) and isinstance(last, dict) and part.get("type") == last.get("type") == "text":
            parts[-1] = {**last, "text": str(last.get("text") or "") + str(part.get("text") or "")}
        elif isinstance(part, dict) and isinstance(last, dict) and part.get("type") == last.get("type") == "thinking" \
                and isinstance(part.get("thinking"), list) and isinstance(last.get("thinking"), list):
            parts[-1] = {**last, "thinking": [*last["thinking"], *part["thinking"]]}
        else:
            parts.append(part)
    message["content"] = parts


def _join_calls(message: dict[str, Any], calls: Any) -> None:
    """Tool call fragments joined by their `index`: the id, type and name once, the arguments in pieces."""
    joined: list[dict[str, Any]] = message.setdefault("tool_calls", [])
    for fragment in calls if isinstance(calls, list) else []:
        if not isinstance(fragment, dict):
            continue
        index = fragment.get("index", len(joined))
        found = next((c for c in joined if c.get("index") == index), None)
        call: dict[str, Any] = found if found is not None else {
            "index": index, "id": None, "type": "function", "function": {"name": None, "arguments": ""}}
        if found is None:
            joined.append(call)
        for key in ("id", "type"):
            if fragment.get(key):
                call[key] = fragment[key]
        function: dict[str, Any] = fragment["function"] if isinstance(fragment.get("function"), dict) else {}
        if function.get("name"):
            call["function"]["name"] = function["name"]
        call["function"]["arguments"] += str(function.get("arguments") or "")


_TEXT_FIELDS = ("reasoning_content", "reasoning", "refusal")


def _chat_delta(choice: dict[str, Any], delta: dict[str, Any]) -> None:
    message = choice.setdefault("message", {"role": "assistant", "content": None})
    if delta.get("role"):
        message["role"] = delta["role"]
    _join_content(message, delta.get("content"))
    for key in _TEXT_FIELDS:
        if isinstance(delta.get(key), str) and delta[key]:
            message[key] = str(message.get(key) or "") + delta[key]
    if delta.get("tool_calls"):
        _join_calls(message, delta["tool_calls"])
    if isinstance(delta.get("annotations"), list):
        message.setdefault("annotations", []).extend(delta["annotations"])


def _whole_message(choice: dict[str, Any], whole: dict[str, Any]) -> None:
    """A closing object's full message: what the deltas did not carry taken from it, nothing doubled."""
    message = choice.setdefault("message", {"role": "assistant", "content": None})
    for key, value in whole.items():
        if value not in (None, "", []) and message.get(key) in (None, "", []):
            message[key] = copy.deepcopy(value)


_CHAT_TOP = ("id", "created", "model", "system_fingerprint", "service_tier", "usage", "citations", "search_results",
             "provider")


def _add_chunk(state: Open, chunk: dict[str, Any]) -> None:
    for key in _CHAT_TOP:
        if chunk.get(key) is not None:
            state.snapshot[key] = chunk[key]
    for raw in chunk.get("choices") or []:
        if not isinstance(raw, dict):
            continue
        index: int = raw["index"] if isinstance(raw.get("index"), int) else 0
        choice = state.choices.setdefault(index, {"index": index, "finish_reason": None})
        if isinstance(raw.get("delta"), dict):
            _chat_delta(choice, raw["delta"])
        if isinstance(raw.get("message"), dict):
            _whole_message(choice, raw["message"])
        if raw.get("finish_reason"):
            choice["finish_reason"] = raw["finish_reason"]
        if raw.get("error") is not None:
            choice["error"] = raw["error"]


def _finished(state: Open) -> bool:
    return bool(state.choices) and all(c.get("finish_reason") for c in state.choices.values())


def _chat_record(state: Open, ended_by: str | None) -> dict[str, Any]:
    choices = []
    for index in sorted(state.choices):
        choice = copy.deepcopy(state.choices[index])
        message = choice.setdefault("message", {"role": "assistant", "content": None})
        for call in message.get("tool_calls") or []:
            call.pop("index", None)
        if not message.get("tool_calls"):
            message.pop("tool_calls", None)
        if not choice.get("finish_reason"):
            choice["finish_reason"] = CUT_OFF
        choices.append(choice)
    response = {**state.snapshot, "object": "chat.completion", "choices": choices}
    return {"response": response, "metadata": state.meta(ended_by)}


class Chat:
    """Chat Completions chunks, joined completion by completion (grouped by the chunks' `id`)."""

    def __init__(self) -> None:
        self.open: dict[str, Open] = {}

    def add(self, line: int, chunk: dict[str, Any]) -> Iterator[Out]:
        key = str(chunk.get("id") or "")
        if chunk.get("object") == DONE and key not in self.open and len(self.open) == 1:
            key = next(iter(self.open))  # a closing object without the chunks' id closes the one open
        for other in [k for k, s in self.open.items() if k != key and _finished(s)]:
            yield from self.close(other, "finish_reason")  # a new completion began: a finished one gets no more
        state = self.open.setdefault(key, Open(first=line))
        state.seen(line)
        _add_chunk(state, chunk)
        if chunk.get("object") == DONE:  # the stream's own end: every choice of it is finished
            for choice in state.choices.values():
                choice["finish_reason"] = choice.get("finish_reason") or "stop"
            yield from self.close(key, DONE)

    def close(self, key: str, ended_by: str | None) -> Iterator[Out]:
        state = self.open.pop(key)
        yield state.first, _chat_record(state, ended_by if _finished(state) else None)
