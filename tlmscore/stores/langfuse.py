"""Langfuse: observation exports in, scores out.

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

Write-back (`--to langfuse`, the host in `LANGFUSE_HOST`): one score per row that has a trace id,
through the `langfuse` SDK's API client (the `langfuse` extra): `traceId`, `observationId` (the
row's `span_id`), name `tlmscore.<scorer>`, the score as a NUMERIC value and the explanation as its
`comment`; a row that is not scorable becomes a CATEGORICAL score `not scorable` whose comment is
the reason. The score `id` is derived from (trace, observation, name), so a re-run sends the same
ids and Langfuse updates the scores it has. `LANGFUSE_PUBLIC_KEY` and `LANGFUSE_SECRET_KEY` are
the basic auth, sent only to `LANGFUSE_HOST`. `langfuse-json:FILE` appends the score bodies to FILE.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from tlmscore._tables import json_cell
from tlmscore.stores import langfuse_trace
from tlmscore.stores._http import RETRY_STATUS, HostedStore, failure
from tlmscore.stores.base import Annotation, Keys, Sent, Session, Target
from tlmscore.stores.langfuse_shapes import (
    chat_messages,
    chat_tools,
    declared_tools,
    instructions_of,
    is_response,
    is_responses_items,
    typed_items,
)
from tlmscore.stores.reading import Peek, Read, SourceReader, read_rows, rows, table_kind, texts

__all__ = ["CONNECTOR", "LangfuseConnector", "detect", "observation_record", "read", "score_body", "score_id"]

ORIGIN = "langfuse"
KEYS = Keys(secrets=("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"), servers=("LANGFUSE_HOST", "LANGFUSE_BASE_URL"))
_NAMESPACE = uuid.UUID("5b0c3f0e-7a51-4d1e-9f3c-0c1b7d2a6e41")
"""Fixed namespace of tlmscore's score ids (changing it would make every re-run add new scores)."""
_TYPES = frozenset({"SPAN", "GENERATION", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR",
                    "EMBEDDING", "GUARDRAIL"})
_LANGCHAIN = frozenset({"ai", "AIMessage", "AIMessageChunk"})
_PAIR = 2  # a Parquet map cell reads as (key, value) pairs
_PROMPT_KEYS = frozenset({"input", "instructions", "tools", "tool_choice", "parallel_tool_calls"})
_REQUEST_KEYS = _PROMPT_KEYS | {"previous_response_id", "text"}
"""What an integration logging the request's keyword arguments as the input keeps of them (not model or metadata)."""
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
    return None if value == "" else json_cell(value)


def detect(sample: Peek) -> bool:
    """A table whose first row is a Langfuse observation: an id, a trace id and an observation type."""
    row, kind = sample.first, sample.first.get("type")
    return (isinstance(kind, str) and kind.upper() in _TYPES and row.get("id") is not None
            and _get(row, "trace_id", "traceId") is not None)


def _metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    """The observation's metadata: an object, JSON text, or a Parquet map's (key, value) pairs."""
    value = _json(row.get("metadata"))
    if isinstance(value, list):
        value = {pair[0]: pair[1] for pair in value if isinstance(pair, (list, tuple)) and len(pair) == _PAIR}
    return {str(k): _json(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _is_chat(output: Any, prompt: Any) -> bool:
    """A Chat Completions call: its output is messages of any framework's shape (or streamed text).

    Responses items (typed or not) are no chat call.
    """
    if isinstance(output, str) or (isinstance(output, Mapping) and isinstance(output.get("choices"), list)):
        return True  # a streamed chat call's text (a Response's output is always items), or a whole completion
    if is_responses_items(output):
        return False
    outs = output if isinstance(output, list) else [output]
    if outs and all(isinstance(o, Mapping) and ("role" in o or "parts" in o or "toolCallId" in o
                                                or o.get("type") in _LANGCHAIN) for o in outs):
        return True
    return isinstance(prompt, Mapping) and "messages" in prompt


def _responses_request(prompt: Any, model: Any) -> tuple[dict[str, Any], list[str]]:
    request: dict[str, Any] = {"model": model}
    if isinstance(prompt, Mapping) and (set(prompt) <= _PROMPT_KEYS or ("input" in prompt
                                                                         and "messages" not in prompt)):
        request.update({k: v for k, v in prompt.items() if k in _REQUEST_KEYS and v is not None})
        request.setdefault("input", [])
    else:
        request["input"] = prompt if prompt is not None else []
    first = request["input"][0] if isinstance(request["input"], list) and request["input"] else None
    folded = isinstance(first, Mapping) and first.get("role") == "system" and "instructions" not in request
    return request, [_FOLDED] if folded else []


def _media_lost(*values: Any) -> list[str]:
    """A warning naming the media references among `values` (nested JSON): their data is not in the export."""
    found = [f"{kind} {mid}" for text in texts(list(values)) for kind, mid in _MEDIA.findall(text)]
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


def _responses_call(prompt: Any, output: Any, model: Any, meta: Mapping[str, Any],
                    parameters: Any = None) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    request, warnings = _responses_request(prompt, model)
    if isinstance(request.get("input"), list):
        request["input"] = typed_items(request["input"])
    if is_response(output):  # the whole Response (an agents framework's integration): its fields are all there
        whole = {**output, "output": typed_items(output["output"])}
        for key in ("instructions", "tools"):
            if whole.get(key) and key not in request:
                request[key] = whole[key]
        return request, whole, _unfold(request, whole.get("instructions"), warnings)
    items = output if isinstance(output, list) else [output] if isinstance(output, Mapping) else []
    response: dict[str, Any] = {"object": "response", "model": model, "output": typed_items(items)}
    if meta.get("object") == "response":  # a streamed call: the Response's other fields are in the metadata
        response.update({k: meta.get(k) for k in ("id", "status", "incomplete_details", "error") if k in meta})
        warnings = _unfold(request, meta.get("instructions"), warnings)
        for key in ("tools", "previous_response_id"):
            if meta.get(key) and key not in request:
                request[key] = meta[key]
    else:
        response["status"] = "completed"
        warnings.append(_RESPONSE_LOST)
    instructions = instructions_of(meta, parameters)
    if instructions and "instructions" not in request and not warnings.count(_FOLDED):
        request["instructions"] = instructions
    return request, response, warnings


def _chat_request(prompt: Any, model: Any, meta: Mapping[str, Any], parameters: Any) -> dict[str, Any]:
    """The Chat Completions request: the messages (any framework's shape), its tools and instructions."""
    request: dict[str, Any] = {"model": model}
    if isinstance(prompt, Mapping):
        request.update({k: v for k, v in prompt.items() if v is not None})
    else:
        request["messages"] = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
    given = request["messages"] if isinstance(request.get("messages"), list) else []
    messages, logged = chat_messages(given)
    request["messages"] = messages
    tools = chat_tools(request.get("tools")) or logged or declared_tools(meta)
    if tools:
        request["tools"] = request["tools"] if chat_tools(request.get("tools")) else tools
    instructions = instructions_of(meta, parameters)
    if instructions and not any(m.get("role") in ("system", "developer") and m.get("content") == instructions
                                for m in messages):
        request["messages"] = [{"role": "system", "content": instructions}, *messages]
    return request


def _chat_call(prompt: Any, output: Any, model: Any, meta: Mapping[str, Any],
               parameters: Any = None) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    request = _chat_request(prompt, model, meta, parameters)
    if isinstance(output, Mapping) and isinstance(output.get("choices"), list):  # the whole completion: nothing lost
        return request, {"object": "chat.completion", "model": model, **output}, []
    outs = output if isinstance(output, list) else [output]
    if outs and all(isinstance(o, Mapping) and "toolCallId" in o and "role" not in o for o in outs):
        outs = [{"role": "assistant", "content": [{"type": "tool-call", **o} for o in outs]}]  # AI SDK's calls
    messages, _ = chat_messages([m if isinstance(m, Mapping) else {"role": "assistant", "content": m}
                                 for m in outs])
    stated = next((o["response_metadata"].get("finish_reason") for o in outs if isinstance(o, Mapping)
                   and isinstance(o.get("response_metadata"), Mapping)), None)
    choices = []
    for index, message in enumerate(m for m in messages if m.get("role") != "tool"):
        reason = meta.get("finish_reason") or stated or ("tool_calls" if message.get("tool_calls") else "stop")
        choices.append({"index": index, "finish_reason": reason, "message": {**message, "role": "assistant"}})
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
    meta = _metadata(row)
    model = _get(row, "provided_model_name", "providedModelName", "model") or meta.get("ls_model_name")
    parameters = _json(_get(row, "model_parameters", "modelParameters"))
    build = _chat_call if _is_chat(output, prompt) and not is_response(output) else _responses_call
    request, response, warnings = build(prompt, output, model, meta, parameters)
    warnings += _media_lost(prompt, output)
    oid = str(row.get("id"))
    extra = {"name": row.get("name"), "start_time": _get(row, "start_time", "startTime"),
             "parent_observation_id": _get(row, "parent_observation_id", "parentObservationId"),
             "model_parameters": parameters}
    return {"id": oid, "request": request, "response": response, "origin": ORIGIN,
            "trace_id": str(_get(row, "trace_id", "traceId")), "span_id": oid,
            "metadata": {k: v for k, v in extra.items() if v is not None}, "warnings": warnings}


def read(address: str) -> Iterator[Read]:
    """The generations of an observation export, in the file's order."""
    path = Path(address)
    yield from read_rows(rows(path, table_kind(path) or "jsonl"), observation_record, "observation")


def score_id(trace_id: str, observation_id: str | None, name: str) -> str:
    """The score's id: the same for the same (trace, observation, name), so a re-run updates it."""
    return str(uuid.uuid5(_NAMESPACE, f"langfuse\0{trace_id}\0{observation_id or ''}\0{name}"))


def score_body(annotation: Annotation) -> dict[str, Any] | None:
    """One row's score as the body `POST /api/public/scores` takes (API field names); None without a trace id."""
    trace_id, observation_id = annotation.trace_id, annotation.span_id
    if trace_id is None:
        return None
    body: dict[str, Any] = {"id": score_id(trace_id, observation_id, annotation.name), "traceId": trace_id}
    if observation_id is not None:
        body["observationId"] = observation_id
    if annotation.score is None:
        body |= {"name": annotation.name, "value": annotation.label, "dataType": "CATEGORICAL"}
    else:
        body |= {"name": annotation.name, "value": annotation.score, "dataType": "NUMERIC"}
    if annotation.explanation:
        body["comment"] = annotation.explanation
    body["metadata"] = {"label": annotation.label, "tlmscore.record.id": annotation.row_id}
    return body


class LangfuseConnector(HostedStore):
    """Langfuse: observation exports in, scores out."""

    name = "langfuse"
    origins = (ORIGIN,)
    readers = (SourceReader("langfuse", detect, read, wants="`id`, `trace_id` (or `traceId`) and a `type`"),
               SourceReader("langfuse-trace", langfuse_trace.detect,
                            lambda address: langfuse_trace.read(address, observation_record),
                            wants="a trace's `id` and its `observations`"))
    keys = KEYS
    batch_size = 512
    forms = ("langfuse (LANGFUSE_HOST)", "langfuse-json:FILE")
    annotates = "trace"

    def headers(self, env: Mapping[str, str]) -> dict[str, str]:
        """The public and secret key as basic auth, and the public key as Langfuse's own header."""
        public, secret = (env.get(name, "") for name in KEYS.secrets)
        basic = base64.b64encode(f"{public}:{secret}".encode()).decode("ascii")
        return {"Authorization": f"Basic {basic}", "X-Langfuse-Public-Key": public}

    def payload(self, annotation: Annotation) -> Any | None:
        """The score body (rows without a trace id have none)."""
        return score_body(annotation)

    def deliver(self, target: Target, bodies: Sequence[Any], session: Session) -> Sent:
        """One batch of scores through the SDK's API client, over the delivery's HTTP client."""
        from langfuse.api import CreateScoreBatchResults, LangfuseAPI  # noqa: PLC0415  (the `langfuse` extra)
        from langfuse.api.core import ApiError  # noqa: PLC0415

        client = LangfuseAPI(base_url=target.location, headers=dict(target.headers), x_langfuse_sdk_name="tlmscore",
                             timeout=session.timeout, httpx_client=session.client)
        try:
            reply = client.scores.create(request=list(bodies),  # API-ready dicts, as the SDK itself sends
                                         request_options={"max_retries": 0})
        except ApiError as exc:
            status = exc.status_code
            return Sent.failed(len(bodies), f"HTTP {status}", retry=status is None or status in RETRY_STATUS)
        except httpx.HTTPError as exc:
            return Sent.failed(len(bodies), failure(exc, session.timeout), retry=True)
        if isinstance(reply, CreateScoreBatchResults) and reply.rejected:
            reasons = "; ".join(error.message for error in reply.errors[:3])
            return Sent.failed(len(bodies), f"Langfuse rejected {reply.rejected} of {len(bodies)} scores: {reasons}",
                               retry=False)
        return Sent.stored(len(bodies))


CONNECTOR = LangfuseConnector()
