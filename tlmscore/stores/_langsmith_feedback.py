"""Annotations as LangSmith feedback, through the `langsmith` SDK's `Client.create_feedback` (the `langsmith` extra).

One feedback per row that has a run id (the row's `span_id`, a UUID as LangSmith's run ids are;
its `trace_id` is sent too when it is one): key `tlmscore.<scorer>`, the score, the label as the
feedback's `value`, the explanation (or why the row is not scorable) as its `comment`, and the
record id in the source's metadata. A row that is not scorable has no `score`.

The feedback id is derived from (run, key), so a re-run sends the same ids; a feedback that
exists already (the server answers 409) is updated in place with `Client.update_feedback`.
The key (`LANGSMITH_API_KEY`) is the SDK's `x-api-key` header; it is sent and never written.
"""

from __future__ import annotations

import logging
import uuid
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from tlmscore.annotate._values import Annotation

ENDPOINT_VARIABLE = "LANGSMITH_ENDPOINT"
KEY_VARIABLE = "LANGSMITH_API_KEY"
DEFAULT_ENDPOINT = "https://api.smith.langchain.com"
_NAMESPACE = uuid.UUID("0f6d7c1e-2b8a-4c55-8e3d-5a9b1c7f2d60")
"""Fixed namespace of tlmscore's feedback ids (changing it would make every re-run add new feedback)."""


def _uuid(value: Any) -> str | None:
    """A run or trace id as a UUID string; None when absent or not a UUID."""
    if value is None or isinstance(value, float):
        return None
    try:
        return str(uuid.UUID(str(value).strip()))
    except ValueError:
        return None


def feedback_id(run_id: str, key: str) -> str:
    """The feedback's id: the same for the same (run, key), so a re-run updates it."""
    return str(uuid.uuid5(_NAMESPACE, f"langsmith\0{run_id}\0{key}"))


def feedback(row: Mapping[str, Any], annotation: Annotation) -> dict[str, Any] | None:
    """One row's feedback as `create_feedback`'s arguments (and the API's fields); None without a run id."""
    run_id = _uuid(row.get("span_id")) or _uuid(row.get("trace_id"))
    if run_id is None:
        return None
    result: dict[str, Any] = {"id": feedback_id(run_id, annotation.name), "run_id": run_id, "key": annotation.name,
                              "score": annotation.score, "value": annotation.label,
                              "comment": annotation.explanation or None,
                              "source_info": {"tlmscore.record.id": annotation.row_id}}
    trace_id = _uuid(row.get("trace_id"))
    if trace_id is not None:
        result["trace_id"] = trace_id
    return result


def endpoint(env: Mapping[str, str]) -> str:
    """The LangSmith API from the environment (`LANGSMITH_ENDPOINT`, else LangSmith's own)."""
    return (env.get(ENDPOINT_VARIABLE) or DEFAULT_ENDPOINT).rstrip("/")


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


def send_langsmith(api_url: str, items: Sequence[dict[str, Any]], env: Mapping[str, str]) -> tuple[str | None, bool]:
    """Send one batch of feedback; (None, _) when all were written, else (why, whether to retry)."""
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

    key = env.get(KEY_VARIABLE, "")
    client = Client(api_url=api_url, api_key=key, auto_batch_tracing=False, retry_config=Retry(total=0))
    sdk_log = logging.getLogger("langsmith.client")
    sdk_log.addFilter(_quiet)
    try:
        with warnings.catch_warnings():
            # Feedback on a run without its project id is a deprecation the SDK warns about per call;
            # rows do not carry LangSmith's project id, and the warning would repeat once per row.
            warnings.simplefilter("ignore", LangSmithWarning)
            for item in items:
                _send_one(client, item)
    except (LangSmithAPIError, LangSmithConnectionError, LangSmithRateLimitError, LangSmithRequestTimeout) as exc:
        return _problem(exc, key), True
    except (LangSmithError, ValueError) as exc:
        return _problem(exc, key), False
    finally:
        sdk_log.removeFilter(_quiet)
        client.close()
    return None, False
