"""Delivering annotations: where to (`--to`), retries, and the rows whose annotations could not be written.

Targets: `phoenix://HOST:PORT` (Phoenix span annotations; `phoenix:URL` for https), `otlp:URL`
(OTLP/HTTP protobuf; a URL without a path gets `/v1/logs`), `otlp` alone (the endpoint from
`OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`), and `otlp-json:FILE`
(OTLP/JSON requests appended to FILE, one per line). Headers for OTLP/HTTP come from
`OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_LOGS_HEADERS` only; they are sent and never
written or printed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from tlmscore.annotate._otlp import logs_protobuf, logs_request
from tlmscore.annotate._phoenix import send_phoenix
from tlmscore.annotate._values import Annotation, annotation_of, annotations_of, side_row
from tlmscore.errors import ConfigError

_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_TARGETS = "phoenix://HOST:PORT, otlp:URL, otlp (endpoint from OTEL_EXPORTER_OTLP_*) or otlp-json:FILE"


@dataclass(frozen=True)
class Target:
    """Where annotations go.

    `kind` is "phoenix" (location: the server's URL), "otlp-http" (the logs endpoint) or "otlp-json" (a file).
    """

    kind: str
    location: str


@dataclass
class Outcome:
    """What a delivery did: annotations written, rows whose annotation failed, and why (one line each)."""

    written: int = 0
    skipped: int = 0
    failed_rows: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _logs_endpoint(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"annotation target {url!r}: expected an http(s) URL")
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/v1/logs"


def _base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"annotation target {url!r}: expected phoenix://HOST:PORT or phoenix:http(s)://HOST:PORT")
    return url.rstrip("/")


def parse_target(text: str, env: Mapping[str, str]) -> Target:
    """`--to TEXT` as a `Target`; a `ConfigError` lists the targets there are."""
    scheme, sep, rest = text.partition(":")
    if scheme == "phoenix" and rest.startswith("//"):
        return Target("phoenix", _base_url("http:" + rest))
    if scheme == "phoenix" and sep and rest:
        return Target("phoenix", _base_url(rest))
    if scheme == "otlp-json" and sep and rest:
        return Target("otlp-json", rest)
    if scheme == "otlp" and sep and rest:
        return Target("otlp-http", _logs_endpoint(rest))
    if text == "otlp":
        if env.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
            return Target("otlp-http", env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"])
        if env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            return Target("otlp-http", _logs_endpoint(env["OTEL_EXPORTER_OTLP_ENDPOINT"]))
        raise ConfigError("--to otlp: set OTEL_EXPORTER_OTLP_ENDPOINT (or _LOGS_ENDPOINT), or give otlp:URL")
    raise ConfigError(f"annotation target {text!r}: expected {_TARGETS}")


def otlp_headers(env: Mapping[str, str]) -> dict[str, str]:
    """Headers from `OTEL_EXPORTER_OTLP_HEADERS`, then `..._LOGS_HEADERS` (`key=value,key2=value2`, URL-encoded)."""
    headers: dict[str, str] = {}
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS"):
        for item in env.get(name, "").split(","):
            key, sep, value = item.partition("=")
            if sep and key.strip():
                headers[unquote(key.strip())] = unquote(value.strip())
    return headers


def _post(client: httpx.Client, url: str, body: bytes, headers: Mapping[str, str]) -> str | None:
    """One POST; None when accepted, else why (retryable or not is the caller's question)."""
    try:
        reply = client.post(url, content=body, headers={**headers, "Content-Type": "application/x-protobuf"})
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if reply.is_success:
        return None
    return f"HTTP {reply.status_code}"


def _send_http(client: httpx.Client, url: str, body: bytes, headers: Mapping[str, str], *, attempts: int,
               backoff: float, sleep: Callable[[float], None]) -> str | None:
    problem = None
    for attempt in range(attempts):
        problem = _post(client, url, body, headers)
        retryable = problem is not None and (not problem.startswith("HTTP ")
                                             or int(problem.split()[1]) in _RETRY_STATUS)
        if not retryable:
            return problem
        if attempt + 1 < attempts:
            sleep(backoff * 2**attempt)
    return f"{problem} (after {attempts} attempts)"


def _append_json(path: Path, request: dict[str, Any]) -> str | None:
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(request, ensure_ascii=False, separators=(",", ":")) + "\n")
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return None


def _send_phoenix(location: str, batch: Sequence[Annotation], *, attempts: int, backoff: float,
                  sleep: Callable[[float], None]) -> str | None:
    problem = None
    for attempt in range(attempts):
        try:
            send_phoenix(location, batch)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
            status = exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else None
            if status is not None and status not in _RETRY_STATUS:
                return problem
        else:
            return None
        if attempt + 1 < attempts:
            sleep(backoff * 2**attempt)
    return f"{problem} (after {attempts} attempts)"


def deliver(rows: Sequence[dict[str, Any]], target: Target, *, threshold: float = 0.5,
            env: Mapping[str, str], batch_size: int = 512, attempts: int = 3, backoff: float = 0.5,
            transport: httpx.BaseTransport | None = None, sleep: Callable[[float], None] = time.sleep,
            time_unix_nano: int | None = None) -> Outcome:
    """Write the annotations of `rows` to `target` in batches; a batch that keeps failing is reported, not raised.

    Phoenix annotates spans: rows without a `span_id` are counted in `skipped`.
    """
    outcome = Outcome()
    stamp = time_unix_nano if time_unix_nano is not None else time.time_ns()
    headers = otlp_headers(env) if target.kind == "otlp-http" else {}
    if target.kind == "phoenix":
        outcome.skipped = sum(annotation_of(r, threshold).span_id is None for r in rows)
        rows = [r for r in rows if annotation_of(r, threshold).span_id is not None]
    with httpx.Client(transport=transport, timeout=30.0) as client:
        for start in range(0, len(rows), batch_size):
            batch = rows[start:start + batch_size]
            annotations = annotations_of(batch, threshold)
            if target.kind == "phoenix":
                problem = _send_phoenix(target.location, annotations, attempts=attempts, backoff=backoff,
                                        sleep=sleep)
            elif target.kind == "otlp-json":
                problem = _append_json(Path(target.location), logs_request(annotations, time_unix_nano=stamp))
            else:
                problem = _send_http(client, target.location,
                                     logs_protobuf(logs_request(annotations, time_unix_nano=stamp)), headers,
                                     attempts=attempts, backoff=backoff, sleep=sleep)
            if problem is None:
                outcome.written += len(batch)
            else:
                outcome.failed_rows.extend(side_row(r) for r in batch)
                outcome.errors.append(f"rows {start + 1}-{start + len(batch)}: {problem}")
    return outcome


def write_side_file(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """The rows whose annotations failed, as JSON lines `tlmscore annotate` reads; removed when there are none."""
    if not rows:
        path.unlink(missing_ok=True)
        return
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
