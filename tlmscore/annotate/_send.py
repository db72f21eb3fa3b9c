"""Delivering annotations: where to (`--to`), retries, and the rows whose annotations could not be written.

Targets: `phoenix://HOST:PORT` (Phoenix span annotations; `phoenix:URL` for https), `otlp:URL`
(OTLP/HTTP protobuf; a URL without a path gets `/v1/logs`), `otlp` alone (the endpoint from
`OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`), `otlp-json:FILE`
(OTLP/JSON requests appended to FILE, one per line), `langfuse` (scores to `LANGFUSE_HOST` with
`LANGFUSE_PUBLIC_KEY` / `LANGFUSE_SECRET_KEY`), `langfuse-json:FILE` (score bodies, one per line),
`langsmith` (feedback to `LANGSMITH_ENDPOINT` with `LANGSMITH_API_KEY`) and `langsmith-json:FILE`.
Headers and keys come from the environment only; they are sent and never written or printed.
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

from tlmscore.annotate._langfuse import host as langfuse_host
from tlmscore.annotate._langfuse import missing_keys as langfuse_missing_keys
from tlmscore.annotate._langfuse import score_body, send_langfuse
from tlmscore.annotate._langsmith import KEY_VARIABLE as LANGSMITH_KEY
from tlmscore.annotate._langsmith import endpoint as langsmith_endpoint
from tlmscore.annotate._langsmith import feedback, send_langsmith
from tlmscore.annotate._otlp import logs_protobuf, logs_request
from tlmscore.annotate._phoenix import send_phoenix
from tlmscore.annotate._values import Annotation, annotation_of, annotations_of, side_row
from tlmscore.errors import ConfigError

_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_TARGETS = ("phoenix://HOST:PORT, otlp:URL, otlp (endpoint from OTEL_EXPORTER_OTLP_*), otlp-json:FILE, "
            "langfuse, langfuse-json:FILE, langsmith or langsmith-json:FILE")
_FILES = ("otlp-json", "langfuse-json", "langsmith-json")


@dataclass(frozen=True)
class Target:
    """Where annotations go.

    `kind` is "phoenix" (location: the server's URL), "otlp-http" (the logs endpoint), "langfuse" (the host),
    "langsmith" (the API's URL), or "otlp-json", "langfuse-json", "langsmith-json" (a file).
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


def _base_url(url: str, expected: str = "phoenix://HOST:PORT or phoenix:http(s)://HOST:PORT") -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"annotation target {url!r}: expected {expected}")
    return url.rstrip("/")


def parse_target(text: str, env: Mapping[str, str]) -> Target:
    """`--to TEXT` as a `Target`; a `ConfigError` lists the targets there are."""
    scheme, sep, rest = text.partition(":")
    if scheme == "phoenix" and sep and rest:
        return Target("phoenix", _base_url("http:" + rest if rest.startswith("//") else rest))
    if scheme in _FILES and sep and rest:
        return Target(scheme, rest)
    if text in ("langfuse", "langsmith"):
        return _langfuse_target(env) if text == "langfuse" else _langsmith_target(env)
    if scheme == "otlp" and sep and rest:
        return Target("otlp-http", _logs_endpoint(rest))
    if text == "otlp":
        if env.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
            return Target("otlp-http", env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"])
        if env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            return Target("otlp-http", _logs_endpoint(env["OTEL_EXPORTER_OTLP_ENDPOINT"]))
        raise ConfigError("--to otlp: set OTEL_EXPORTER_OTLP_ENDPOINT (or _LOGS_ENDPOINT), or give otlp:URL")
    raise ConfigError(f"annotation target {text!r}: expected {_TARGETS}")


def _langfuse_target(env: Mapping[str, str]) -> Target:
    where = langfuse_host(env)
    missing = ([] if where else ["LANGFUSE_HOST"]) + langfuse_missing_keys(env)
    if missing:
        raise ConfigError(f"--to langfuse: set {', '.join(missing)}")
    assert where is not None  # noqa: S101  (checked just above; for the type checker)
    return Target("langfuse", _base_url(where, "an http(s) URL in LANGFUSE_HOST"))


def _langsmith_target(env: Mapping[str, str]) -> Target:
    if not env.get(LANGSMITH_KEY):
        raise ConfigError(f"--to langsmith: set {LANGSMITH_KEY} (and LANGSMITH_ENDPOINT for a self-hosted one)")
    return Target("langsmith", _base_url(langsmith_endpoint(env), "an http(s) URL in LANGSMITH_ENDPOINT"))


def otlp_headers(env: Mapping[str, str]) -> dict[str, str]:
    """Headers from `OTEL_EXPORTER_OTLP_HEADERS`, then `..._LOGS_HEADERS` (`key=value,key2=value2`, URL-encoded)."""
    headers: dict[str, str] = {}
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS"):
        for item in env.get(name, "").split(","):
            key, sep, value = item.partition("=")
            if sep and key.strip():
                headers[unquote(key.strip())] = unquote(value.strip())
    return headers


Attempt = Callable[[], tuple[str | None, bool]]
"""One try at sending a batch: (None, _) when it was written, else (why, whether trying again may help)."""


def _post(client: httpx.Client, url: str, body: bytes, headers: Mapping[str, str]) -> tuple[str | None, bool]:
    """One OTLP/HTTP POST."""
    try:
        reply = client.post(url, content=body, headers={**headers, "Content-Type": "application/x-protobuf"})
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}", True
    if reply.is_success:
        return None, False
    return f"HTTP {reply.status_code}", reply.status_code in _RETRY_STATUS


def _phoenix_attempt(location: str, batch: Sequence[Annotation]) -> tuple[str | None, bool]:
    try:
        send_phoenix(location, batch)
    except (httpx.HTTPError, OSError, ValueError) as exc:
        status = exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else None
        return f"{type(exc).__name__}: {exc}", status is None or status in _RETRY_STATUS
    return None, False


def _append_lines(path: Path, items: Sequence[dict[str, Any]]) -> tuple[str | None, bool]:
    """JSON lines appended to a file (not retried: a full disk or a bad path stays so)."""
    try:
        with path.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in items)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}", False
    return None, False


def _retrying(attempt: Attempt, *, attempts: int, backoff: float, sleep: Callable[[float], None]) -> str | None:
    """Try up to `attempts` times with exponential backoff while the failure is one that may pass."""
    problem = None
    for number in range(attempts):
        problem, retryable = attempt()
        if problem is None or not retryable:
            return problem
        if number + 1 < attempts:
            sleep(backoff * 2**number)
    return f"{problem} (after {attempts} attempts)"


@dataclass(frozen=True)
class _Batch:
    """One batch as each kind of target is sent it: the annotations, and the bodies of Langfuse / LangSmith."""

    rows: Sequence[dict[str, Any]]
    annotations: Sequence[Annotation]

    def bodies(self, kind: str) -> list[dict[str, Any]]:
        make = score_body if kind.startswith("langfuse") else feedback
        found = (make(row, a) for row, a in zip(self.rows, self.annotations, strict=True))
        return [body for body in found if body is not None]


def _attempt(target: Target, batch: _Batch, client: httpx.Client, env: Mapping[str, str], *, stamp: int,
             transport: httpx.BaseTransport | None) -> Attempt:
    """How one batch is sent to `target`."""
    kind, location = target.kind, target.location
    if kind == "phoenix":
        return lambda: _phoenix_attempt(location, batch.annotations)
    if kind == "otlp-json":
        return lambda: _append_lines(Path(location), [logs_request(batch.annotations, time_unix_nano=stamp)])
    if kind in ("langfuse-json", "langsmith-json"):
        return lambda: _append_lines(Path(location), batch.bodies(kind))
    if kind == "langfuse":
        return lambda: send_langfuse(location, batch.bodies(kind), env, transport=transport)
    if kind == "langsmith":
        return lambda: send_langsmith(location, batch.bodies(kind), env)
    body = logs_protobuf(logs_request(batch.annotations, time_unix_nano=stamp))
    headers = otlp_headers(env)
    return lambda: _post(client, location, body, headers)


def _reachable(row: dict[str, Any], kind: str, threshold: float) -> bool:
    """Whether the row has the ids `kind` annotates by (a span; a Langfuse trace; a LangSmith run)."""
    annotation = annotation_of(row, threshold)
    if kind == "phoenix":
        return annotation.span_id is not None
    if kind.startswith(("langfuse", "langsmith")):
        return bool(_Batch([row], [annotation]).bodies(kind))
    return True


def deliver(rows: Sequence[dict[str, Any]], target: Target, *, threshold: float = 0.5,
            env: Mapping[str, str], batch_size: int = 512, attempts: int = 3, backoff: float = 0.5,
            transport: httpx.BaseTransport | None = None, sleep: Callable[[float], None] = time.sleep,
            time_unix_nano: int | None = None) -> Outcome:
    """Write the annotations of `rows` to `target` in batches; a batch that keeps failing is reported, not raised.

    Phoenix annotates spans, Langfuse traces and LangSmith runs: rows without those ids are counted in `skipped`.
    """
    outcome = Outcome()
    stamp = time_unix_nano if time_unix_nano is not None else time.time_ns()
    reachable = [r for r in rows if _reachable(r, target.kind, threshold)]
    outcome.skipped = len(rows) - len(reachable)
    with httpx.Client(transport=transport, timeout=30.0) as client:
        for start in range(0, len(reachable), batch_size):
            chunk = reachable[start:start + batch_size]
            batch = _Batch(chunk, annotations_of(chunk, threshold))
            attempt = _attempt(target, batch, client, env, stamp=stamp, transport=transport)
            problem = _retrying(attempt, attempts=attempts, backoff=backoff, sleep=sleep)
            if problem is None:
                outcome.written += len(chunk)
            else:
                outcome.failed_rows.extend(side_row(r) for r in chunk)
                outcome.errors.append(f"rows {start + 1}-{start + len(chunk)}: {problem}")
    return outcome


def write_side_file(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """The rows whose annotations failed, as JSON lines `tlmscore annotate` reads; removed when there are none."""
    if not rows:
        path.unlink(missing_ok=True)
        return
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
