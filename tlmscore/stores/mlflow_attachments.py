"""MLflow's trace attachments: media a span held, stored apart and named by an `mlflow-attachment://` URI.

MLflow's tracing (3.x, `MLFLOW_TRACE_EXTRACT_ATTACHMENTS`, on by default) takes base64 media out of
a span's inputs and outputs, uploads the bytes as an artifact of the trace and leaves in their place
`mlflow-attachment://ID?content_type=…&trace_id=…&size=…` (`mlflow.tracing.attachments.Attachment.ref`).
A data URI (`data:image/png;base64,…`: an image URL, a file's `file_data`) becomes the URI whole; a
bare base64 field (`input_audio.data`, `b64_json`, `source.bytes`, an image generation's `result`)
has its value replaced.

A live read fetches each attachment as MLflow's UI does (`GET /ajax-api/3.0/mlflow/get-trace-artifact
?request_id=TRACE&path=ID`) and puts the media back as the call sent or received it, so the prompt
renders the file or image as the raw record does. An export holds the URIs only: read where
`MLFLOW_TRACKING_URI` names the server that keeps the traces, its attachments are fetched from there;
otherwise its records say, in a warning, which media are kept in MLflow.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from tlmscore._breaker import Breaker
from tlmscore.stores._http import answered, call
from tlmscore.stores.base import Session
from tlmscore.stores.reading import texts

__all__ = ["ARTIFACT_PATH", "PREFIX", "Fetch", "export_warning", "fetcher", "references", "restore", "with_media"]

PREFIX = "mlflow-attachment://"
ARTIFACT_PATH = "/ajax-api/3.0/mlflow/get-trace-artifact"
_BARE_FIELDS = frozenset({"data", "b64_json", "bytes", "result"})
"""The fields whose base64 value MLflow replaces by the URI (a data URI anywhere else is replaced whole)."""

Fetch = Callable[[str, str], bytes | str]
"""(trace id, attachment id) → the attachment's bytes, or a message saying why there are none."""


def _parse(uri: str) -> dict[str, str] | None:
    """The attachment id, content type, trace id and size of a URI; None when it is not one."""
    if not uri.startswith(PREFIX):
        return None
    split = urllib.parse.urlsplit(uri)
    query = dict(urllib.parse.parse_qsl(split.query))
    if not split.hostname or not query.get("trace_id"):
        return None
    return {"id": uri[len(PREFIX):].split("?", 1)[0], "content_type": query.get("content_type") or "",
            "trace_id": query["trace_id"], "size": query.get("size") or "?"}


def references(value: Any) -> list[dict[str, str]]:
    """Every attachment URI in a nested value, parsed, in the order found."""
    return [parsed for text in texts(value) if (parsed := _parse(text)) is not None]


def export_warning(record: Mapping[str, Any]) -> str | None:
    """What a record read from an export lacks: the media MLflow keeps apart (None when there are none)."""
    found = references([record.get("request"), record.get("response")])
    if not found:
        return None
    named = ", ".join(f"{ref['content_type'] or 'media'} of {ref['size']} bytes" for ref in found)
    return (f"MLflow keeps {len(found)} attachment(s) apart from the export ({named}): the prompt shows "
            "their mlflow-attachment:// URIs; set MLFLOW_TRACKING_URI to the server that holds the traces, or "
            "read the experiment live (mlflow://HOST:PORT/EXPERIMENT), to render them")


def restore(value: Any, fetch: Fetch, failures: list[str], key: str = "") -> Any:
    """A nested value with each attachment URI replaced by its media.

    As a data URI, or bare base64 in the fields MLflow took it from; a URI whose bytes cannot be
    fetched stays, its reason in `failures`.
    """
    if isinstance(value, Mapping):
        return {k: restore(v, fetch, failures, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [restore(v, fetch, failures, key) for v in value]
    parsed = _parse(value) if isinstance(value, str) else None
    if parsed is None:
        return value
    got = fetch(parsed["trace_id"], parsed["id"])
    if isinstance(got, str):
        failures.append(f"attachment {parsed['id']} ({parsed['content_type']}): {got}")
        return value
    encoded = base64.b64encode(got).decode("ascii")
    return encoded if key in _BARE_FIELDS else f"data:{parsed['content_type']};base64,{encoded}"


def fetcher(base_url: str, session: Session, headers: Mapping[str, str]) -> Fetch:
    """An attachment's bytes, fetched as MLflow's UI fetches them (or why they cannot be).

    A server that gives no answer three times in a row is given up: the attachments left say why at once.
    """
    breaker = Breaker(noun="requests")

    def fetch(trace_id: str, attachment_id: str) -> bytes | str:
        if breaker.opened is not None:
            return breaker.opened
        reply = call(session.client, "GET", f"{base_url}{ARTIFACT_PATH}", headers, session.timeout,
                     params={"request_id": trace_id, "path": attachment_id})
        if isinstance(reply, str):
            breaker.failed(reply)
            return reply
        breaker.succeeded()
        return reply.content if reply.is_success else f"the server answered {answered(reply)}"
    return fetch


def with_media(record: dict[str, Any], fetch: Fetch) -> dict[str, Any]:
    """The record with its attachments' media put back (those that cannot be fetched named in its warnings)."""
    if not references([record["request"], record["response"]]):
        return record
    failures: list[str] = []
    restored = {**record, "request": restore(record["request"], fetch, failures),
                "response": restore(record["response"], fetch, failures)}
    return restored | ({"warnings": [f"MLflow attachment not fetched: {f}" for f in failures]} if failures else {})
