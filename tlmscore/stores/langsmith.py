"""LangSmith: run exports in, feedback out.

Read: runs as JSON lines, a JSON array, Parquet (the bulk export) or CSV, one run a row with the
run data format's fields (`id`, `trace_id`, `run_type`, `inputs`, `outputs`, `error`, `extra`, …;
`inputs` and `outputs` as objects or JSON text). A run of type `llm` is a record; chains, tools,
retrievers and the other run types are not.

`langsmith.wrappers.wrap_openai` logs the call's keyword arguments as `inputs` (the request, with
the SDK's unset values left out) and the returned `Response` or Chat Completion as `outputs` (its
`usage` renamed `usage_metadata` and reshaped, null fields left out): both are read back as they
are, with the null `description` of the function tools a Response echoes restored, so the prompt
and response are those of the raw call.

Write-back (`--to langsmith`): one feedback per row whose `span_id` (or else `trace_id`) is a
UUID, a LangSmith run id, through the `langsmith` SDK's `Client.create_feedback` (the `langsmith`
extra): key `tlmscore.<scorer>`, the score, the label as the feedback's `value`, the explanation
(or why the row is not scorable) as its `comment`, the record id in the source's metadata. The
feedback id is derived from (run, key), so a re-run sends the same ids; one that exists already
(409) is updated in place with `Client.update_feedback`. `LANGSMITH_API_KEY` is sent (as the SDK's
`x-api-key`) only to `LANGSMITH_ENDPOINT` (default LangSmith's own API).
"""

from __future__ import annotations

import logging
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tlmscore._tables import json_cell
from tlmscore.stores._http import HostedStore
from tlmscore.stores.base import Annotation, Keys, Sent, Session, Target
from tlmscore.stores.reading import Peek, Read, SourceReader, read_rows, rows, table_kind

__all__ = ["CONNECTOR", "DEFAULT_ENDPOINT", "LangSmithConnector", "detect", "feedback", "feedback_id", "read",
           "run_record"]

ORIGIN = "langsmith"
DEFAULT_ENDPOINT = "https://api.smith.langchain.com"
KEYS = Keys(secrets=("LANGSMITH_API_KEY",), servers=("LANGSMITH_ENDPOINT",), default=DEFAULT_ENDPOINT)
_NAMESPACE = uuid.UUID("0f6d7c1e-2b8a-4c55-8e3d-5a9b1c7f2d60")
"""Fixed namespace of tlmscore's feedback ids (changing it would make every re-run add new feedback)."""


def detect(sample: Peek) -> bool:
    """A table whose first row is a LangSmith run: an id and a run type."""
    return isinstance(sample.first.get("run_type"), str) and sample.first.get("id") is not None


def _tool(tool: Any) -> Any:
    """A function tool the Response echoes, with its `description` back.

    The API always returns it (null when unset); `wrap_openai` dumps the Response without null fields.
    """
    if isinstance(tool, Mapping) and tool.get("type") == "function" and "description" not in tool:
        return {**tool, "description": None}
    return tool


def _response(outputs: Mapping[str, Any], chat: bool) -> dict[str, Any]:
    """The logged Response or Chat Completion, with `object` and tool descriptions the dump left out restored."""
    response = {k: v for k, v in outputs.items() if k != "usage_metadata"}
    if isinstance(response.get("tools"), list):
        response["tools"] = [_tool(t) for t in response["tools"]]
    response.setdefault("object", "chat.completion" if "choices" in response or chat else "response")
    return response


def run_record(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The transcript record of an `llm` run; None for a run of another type.

    Raises `ValueError` for an `llm` run that holds no OpenAI call to read.
    """
    if str(run.get("run_type")).lower() != "llm":
        return None
    inputs, outputs = json_cell(run.get("inputs")), json_cell(run.get("outputs"))
    if not outputs and run.get("error"):
        first = (str(run["error"]).strip().splitlines() or ["error"])[0]  # repr of the exception, then its trace
        raise ValueError(f"the LLM call failed: {first}")
    if not isinstance(inputs, Mapping) or not isinstance(outputs, Mapping):
        raise TypeError("run has no inputs and outputs objects")
    chat = "messages" in inputs
    if "output" not in outputs and "choices" not in outputs:
        raise ValueError("run outputs hold no Response or Chat Completion (not an OpenAI call "
                         f"as wrap_openai logs it; keys: {', '.join(sorted(outputs)) or 'none'})")
    run_id = str(run.get("id"))
    extra = {"name": run.get("name"), "start_time": run.get("start_time"),
             "parent_run_id": run.get("parent_run_id"), "session_id": run.get("session_id"),
             "usage_metadata": outputs.get("usage_metadata")}
    trace_id = run.get("trace_id")
    return {"id": run_id, "request": dict(inputs), "response": _response(outputs, chat), "origin": ORIGIN,
            "trace_id": str(trace_id) if trace_id is not None else None, "span_id": run_id,
            "metadata": {k: v for k, v in extra.items() if v is not None}, "warnings": []}


def read(address: str) -> Iterator[Read]:
    """The `llm` runs of a run export, in the file's order."""
    path = Path(address)
    yield from read_rows(rows(path, table_kind(path) or "jsonl"), run_record, "run")


def _uuid(value: str | None) -> str | None:
    """A run or trace id as a UUID string; None when absent or not a UUID."""
    try:
        return str(uuid.UUID(value.strip())) if value else None
    except ValueError:
        return None


def feedback_id(run_id: str, key: str) -> str:
    """The feedback's id: the same for the same (run, key), so a re-run updates it."""
    return str(uuid.uuid5(_NAMESPACE, f"langsmith\0{run_id}\0{key}"))


def feedback(annotation: Annotation) -> dict[str, Any] | None:
    """One row's feedback as `create_feedback`'s arguments (and the API's fields); None without a run id."""
    run_id = _uuid(annotation.span_id) or _uuid(annotation.trace_id)
    if run_id is None:
        return None
    result: dict[str, Any] = {"id": feedback_id(run_id, annotation.name), "run_id": run_id, "key": annotation.name,
                              "score": annotation.score, "value": annotation.label,
                              "comment": annotation.explanation or None,
                              "source_info": {"tlmscore.record.id": annotation.row_id}}
    trace_id = _uuid(annotation.trace_id)
    if trace_id is not None:
        result["trace_id"] = trace_id
    return result


def _problem(exc: Exception, key: str) -> str:
    """One line about a failed call, with the key masked should the SDK's message hold it."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text.replace(key, '***') if key else text}"[:300]


def _quiet(record: logging.LogRecord) -> bool:
    """Drop the SDK's own traceback for a feedback that failed: the failure is reported here, in one line."""
    return record.getMessage() != "Error creating feedback"


def _send_one(client: Any, item: dict[str, Any]) -> None:
    from langsmith.utils import LangSmithConflictError  # noqa: PLC0415  (the `langsmith` extra)

    try:
        client.create_feedback(run_id=item["run_id"], trace_id=item.get("trace_id"), key=item["key"],
                               score=item["score"], value=item["value"], comment=item["comment"],
                               feedback_id=item["id"], source_info=item["source_info"], stop_after_attempt=1)
    except LangSmithConflictError:  # sent by an earlier run: the same feedback, updated in place
        client.update_feedback(item["id"], score=item["score"], value=item["value"], comment=item["comment"])


class LangSmithConnector(HostedStore):
    """LangSmith: run exports in, feedback out."""

    name = "langsmith"
    origins = (ORIGIN,)
    readers = (SourceReader("langsmith", detect, read, wants="`id` and `run_type`"),)
    keys = KEYS
    batch_size = 512
    forms = ("langsmith (LANGSMITH_API_KEY)", "langsmith-json:FILE")
    annotates = "run"

    def headers(self, env: Mapping[str, str]) -> dict[str, str]:
        """`LANGSMITH_API_KEY` as LangSmith's `x-api-key`."""
        key = env.get(KEYS.secrets[0], "").strip()
        return {"x-api-key": key} if key else {}

    def payload(self, annotation: Annotation) -> Any | None:
        """The feedback (rows without a run id have none)."""
        return feedback(annotation)

    def deliver(self, target: Target, items: Sequence[Any], session: Session) -> Sent:
        """Feedback one at a time through the SDK; the first that fails stops the batch (those before it are stored)."""
        from langsmith import Client  # noqa: PLC0415  (the `langsmith` extra, only when writing to LangSmith)
        from langsmith.utils import (  # noqa: PLC0415
            LangSmithAPIError,
            LangSmithConnectionError,
            LangSmithError,
            LangSmithRateLimitError,
            LangSmithRequestTimeout,
            LangSmithWarning,
        )
        from urllib3.util.retry import Retry  # noqa: PLC0415

        key = target.headers.get("x-api-key", "")  # "" (not None): the SDK then reads no key from the environment
        client = Client(api_url=target.location, api_key=key, auto_batch_tracing=False, retry_config=Retry(total=0),
                        timeout_ms=int(session.timeout * 1000))
        sdk_log = logging.getLogger("langsmith.client")
        sdk_log.addFilter(_quiet)
        done = 0
        try:
            with warnings.catch_warnings():
                # Feedback on a run without its project id is a deprecation the SDK warns about per call;
                # rows do not carry LangSmith's project id, and the warning would repeat once per row.
                warnings.simplefilter("ignore", LangSmithWarning)
                for item in items:
                    _send_one(client, item)
                    done += 1
        except (LangSmithAPIError, LangSmithConnectionError, LangSmithRateLimitError, LangSmithRequestTimeout) as exc:
            return Sent.partly(done, len(items), _problem(exc, key), retry=True)
        except (LangSmithError, ValueError) as exc:
            return Sent.partly(done, len(items), _problem(exc, key), retry=False)
        finally:
            sdk_log.removeFilter(_quiet)
            client.close()
        return Sent.stored(len(items))


CONNECTOR = LangSmithConnector()
