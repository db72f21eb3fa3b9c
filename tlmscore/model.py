"""The values that flow between stages: transcripts, turns, conversations and scoring inputs.

All are frozen: a stage returns new values and never edits what it was given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Conversation",
    "Evidence",
    "FileResult",
    "Message",
    "ResponseStatus",
    "ScoringInput",
    "ToolCall",
    "ToolResult",
    "Transcript",
    "Turn",
    "WebRef",
    "WebResult",
    "is_item_reference",
    "item_type",
]


def is_item_reference(item: dict[str, Any]) -> bool:
    """Whether an input item stands for an earlier one by id (`type` may be left out: a bare `{id}`)."""
    return item.get("type") == "item_reference" or (item.get("type") is None and set(item) == {"id"})


def item_type(item: object) -> str:
    """An item's type, also where the API lets it be left out: a bare `{role, content}` is a message, `{id}` a ref."""
    if isinstance(item, dict):
        kind = item.get("type")
        if kind is None and "role" in item:
            return "message"
        if is_item_reference(item):
            return "item_reference"
        return str(kind) if kind is not None else "unknown"
    return "unknown"


@dataclass(frozen=True)
class ResponseStatus:
    """A response's status (`completed`, `incomplete:<reason>`, `failed`, ...), as ingest decided it for the row.

    `error`: no answer to score (an error row, with this message); `warning`: an answer, not a complete one (scored).
    """

    value: str
    error: str | None = None
    warning: str | None = None


@dataclass(frozen=True)
class Transcript:
    """One logged call: the request kwargs, the Response as a dict, and where it came from.

    `raw` keeps the record exactly as read, unknown fields included. A record that could not be
    read has `error` set and an empty response; it still becomes one output row. `status` is decided
    once as the record is read (None when not known): a failed or unfinished response has its `error`. `origin`,
    `trace_id` and `span_id` say where a source found it (the kind of source, the trace store's
    ids); `warnings` say what the source could not hold of the call.
    """

    id: str
    source: str
    line: int
    request: dict[str, Any] = field(default_factory=dict)
    response: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    raw: Any = None
    error: str | None = None
    status: ResponseStatus | None = None
    fmt: Literal["responses", "chat"] = "responses"
    origin: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def model(self) -> str | None:
        """The model that answered, from the response or else the request."""
        value = self.response.get("model") or self.request.get("model")
        return str(value) if value is not None else None


@dataclass(frozen=True)
class Message:
    """A chat turn: `role` decides the prefix, `name` (when set) replaces it as the reference does.

    `calls` holds the tool calls of a Chat Completions assistant message, which render inside it.
    """

    role: str
    text: str
    name: str | None = None
    calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolCall:
    """The assistant calling a tool; `server` marks a built-in tool that ran on the provider's side."""

    name: str
    arguments: Any
    call_id: str
    server: bool = False


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned, as the JSON value shown to the scorer."""

    name: str
    call_id: str
    output: Any


@dataclass(frozen=True)
class WebRef:
    """A web page the model saw: its URL, title when known, and the answer sentences that cite it.

    `number` is the answer's number for the page (`[n]`) when the answer numbers its sources;
    `snippet` and `date` are what the provider logged about the page (what the model saw of it).
    """

    url: str
    title: str | None = None
    cited: tuple[str, ...] = ()
    number: int | None = None
    snippet: str | None = None
    date: str | None = None


@dataclass(frozen=True)
class WebResult:
    """A web tool's result: references to pages, turned into text only at render time.

    `status` is the call's status (`failed`: the call returned nothing). `unlogged` marks the pages
    the answer cites that are among no logged result: shown apart, never as a call's result, with
    `note` (when set) saying why in place of the usual words.
    """

    name: str
    call_id: str
    refs: tuple[WebRef, ...]
    focus: tuple[str, ...] = ()
    status: str = "completed"
    unlogged: bool = False
    note: str | None = None


@dataclass(frozen=True)
class FileResult(ToolResult):
    """A file search's results, with the answer sentences that cite each file (`file_id` → sentences)."""

    cited: tuple[tuple[str, tuple[str, ...]], ...] = ()


Turn = Message | ToolCall | ToolResult | WebResult


@dataclass(frozen=True)
class Conversation:
    """A transcript converted to turns: what the model saw (`turns`) and what it answered (`answer`).

    `tools` are function declarations already in the reference's JSON shape; `has_tools` is true
    when the request listed tools at all (the reference then adds a tools section even if empty).
    """

    turns: tuple[Turn, ...]
    answer: tuple[Turn, ...] = ()
    tools: tuple[dict[str, Any], ...] = ()
    has_tools: bool = False
    instructions: str | None = None
    style: Literal["responses", "chat"] = "responses"
    warnings: tuple[str, ...] = ()

    @property
    def urls(self) -> tuple[str, ...]:
        """Every page URL the conversation's web results refer to, in order of appearance."""
        return tuple(ref.url for turn in self.turns if isinstance(turn, WebResult) for ref in turn.refs)


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence exactly as render put it in the prompt, as a value for scorers.

    `text` is the budgeted text the prompt shows (empty when nothing could be shown); `available`
    is false when the evidence could not be had (a failed page, a failed call), and `status` then
    says why (a page record's `status`, or `failed` for a call). `call_id` names the call whose
    result holds it; None means the answer cites it but no logged result contains it. `number` is
    the answer's citation number (`[n]`) when the answer numbers its sources. `cited` holds the
    (start, end) character spans of the rendered response that cite it: the sentences the answer
    closes with a citation of it. `snippet` and `date` are what the provider logged about a page
    (shown beside the fetched text; when the page could not be fetched the snippet is the
    evidence, with `origin` `log`). `error` says in words why a page could not be had (the page
    record's `error`). A page a model read and summarised has `origin` `model`, and `note` says so
    as the prompt does ("summarised by MODEL on DATE, not the page itself").
    """

    kind: Literal["page", "file", "tool", "message"]
    text: str
    available: bool = True
    status: str = "ok"
    call_id: str | None = None
    tool: str | None = None
    number: int | None = None
    url: str | None = None
    title: str | None = None
    doc_id: str | None = None
    origin: str | None = None
    cited: tuple[tuple[int, int], ...] = ()
    snippet: str | None = None
    date: str | None = None
    error: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class ScoringInput:
    """The two strings a scorer sees, plus the values they were rendered from.

    `evidence` is what render showed, as values (None for prompts rendered elsewhere: scorers then
    read the prompt text). `status` is the response's status (`completed`, `incomplete:<reason>`,
    ...), so a scorer can refuse or penalise an answer that was cut short.
    """

    prompt: str
    response: str
    conversation: Conversation | None = None
    evidence: tuple[Evidence, ...] | None = None
    status: str = "completed"
