"""Annotations as Langfuse scores, through the `langfuse` SDK's API client (the `langfuse` extra).

One score per row that has a trace id: `traceId`, `observationId` (the row's `span_id`), name
`tlmscore.<scorer>`, the score as a NUMERIC value and the explanation as its `comment`. A row
that is not scorable (an error, or no score) has no number to give: it becomes a CATEGORICAL
score of the same name whose value is `not scorable` and whose comment is the reason. The label
and the record id go in the score's `metadata`.

The score `id` is derived from (trace, observation, name), so a re-run sends the same ids and
Langfuse updates the scores it has rather than adding new ones. The keys (`LANGFUSE_PUBLIC_KEY`,
`LANGFUSE_SECRET_KEY`) are the SDK's basic auth; they are sent and never written.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from tlmscore.annotate._values import NOT_SCORABLE, Annotation

HOST_VARIABLES = ("LANGFUSE_HOST", "LANGFUSE_BASE_URL")
KEY_VARIABLES = ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY")
_RETRY_STATUS = frozenset({408, 429})
_SERVER_ERROR = 500
_NAMESPACE = uuid.UUID("5b0c3f0e-7a51-4d1e-9f3c-0c1b7d2a6e41")
"""Fixed namespace of tlmscore's score ids (changing it would make every re-run add new scores)."""


def _text(value: Any) -> str | None:
    """An id column as text; None when absent (null, NaN, empty)."""
    if value is None or isinstance(value, float) or str(value).strip() == "":
        return None
    return str(value).strip()


def score_id(trace_id: str, observation_id: str | None, name: str) -> str:
    """The score's id: the same for the same (trace, observation, name), so a re-run updates it."""
    return str(uuid.uuid5(_NAMESPACE, f"langfuse\0{trace_id}\0{observation_id or ''}\0{name}"))


def score_body(row: Mapping[str, Any], annotation: Annotation) -> dict[str, Any] | None:
    """One row's score as the body `POST /api/public/scores` takes (API field names); None without a trace id."""
    trace_id = _text(row.get("trace_id"))
    if trace_id is None:
        return None
    observation_id = _text(row.get("span_id"))
    body: dict[str, Any] = {"id": score_id(trace_id, observation_id, annotation.name), "traceId": trace_id}
    if observation_id is not None:
        body["observationId"] = observation_id
    if annotation.label == NOT_SCORABLE or annotation.score is None:
        body |= {"name": annotation.name, "value": NOT_SCORABLE, "dataType": "CATEGORICAL"}
    else:
        body |= {"name": annotation.name, "value": annotation.score, "dataType": "NUMERIC"}
    if annotation.explanation:
        body["comment"] = annotation.explanation
    body["metadata"] = {"label": annotation.label, "tlmscore.record.id": annotation.row_id}
    return body


def host(env: Mapping[str, str]) -> str | None:
    """The Langfuse host from the environment (`LANGFUSE_HOST`, else `LANGFUSE_BASE_URL`)."""
    return next((env[name].rstrip("/") for name in HOST_VARIABLES if env.get(name)), None)


def missing_keys(env: Mapping[str, str]) -> list[str]:
    """The key variables a Langfuse host needs that are not set."""
    return [name for name in KEY_VARIABLES if not env.get(name)]


def send_langfuse(base_url: str, bodies: Sequence[dict[str, Any]], env: Mapping[str, str], *,
                  transport: httpx.BaseTransport | None = None) -> tuple[str | None, bool]:
    """Send one batch of score bodies; (None, _) when all were accepted, else (why, whether to retry)."""
    from langfuse.api import CreateScoreBatchResults, LangfuseAPI  # noqa: PLC0415  (the `langfuse` extra)
    from langfuse.api.core import ApiError  # noqa: PLC0415

    public, secret = (env.get(name, "") for name in KEY_VARIABLES)
    with httpx.Client(transport=transport, timeout=30.0) as http:
        client = LangfuseAPI(base_url=base_url, username=public, password=secret,
                             x_langfuse_public_key=public, x_langfuse_sdk_name="tlmscore", httpx_client=http)
        try:
            reply = client.scores.create(request=list(bodies),  # API-ready dicts, as the SDK itself sends
                                         request_options={"max_retries": 0})
        except ApiError as exc:
            status = exc.status_code
            return f"HTTP {status}", status is None or status in _RETRY_STATUS or status >= _SERVER_ERROR
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}", True
    if isinstance(reply, CreateScoreBatchResults) and reply.rejected:
        reasons = "; ".join(error.message for error in reply.errors[:3])
        return f"Langfuse rejected {reply.rejected} of {len(bodies)} scores: {reasons}", False
    return None, False
