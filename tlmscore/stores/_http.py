"""What the stores share: one-line failures, retryable answers, a call, a live server's GET and checks, JSON lines."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tlmscore.errors import ConfigError, TranscriptError
from tlmscore.stores.base import FileStore, Keys, Sent, Session, Target

NOT_FOUND = 404
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
"""Answers that may pass: a timeout, too many requests, a server error or a gateway's."""


def failure(exc: httpx.HTTPError, timeout: float) -> str:
    """A request that got no answer, in one line."""
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s ({type(exc).__name__})"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300]


def answered(reply: httpx.Response) -> str:
    """An HTTP answer, in one line: `HTTP 503 Service Unavailable`."""
    return f"HTTP {reply.status_code} {reply.reason_phrase}".rstrip()


def sent(reply: httpx.Response | str, count: int) -> Sent:
    """A batch of `count` sent in one `call`: all stored on a 2xx, else none (retried when it may pass: no answer)."""
    if isinstance(reply, str):
        return Sent.failed(count, reply, retry=True)
    if reply.is_success:
        return Sent.stored(count)
    return Sent.failed(count, answered(reply), retry=reply.status_code in RETRY_STATUS)


def call(client: httpx.Client, method: str, url: str, headers: Mapping[str, str], timeout: float, *,
         json: Any = None, params: Any = None, content: bytes | None = None) -> httpx.Response | str:
    """One request: its answer, or a line saying why there is none."""
    try:
        return client.request(method, url, headers=dict(headers), json=json, params=params, content=content,
                              timeout=timeout)
    except httpx.HTTPError as exc:
        return failure(exc, timeout)


def get(session: Session, server: str, path: str, headers: Mapping[str, str], params: Any = None, *,
        what: str | None = None) -> httpx.Response:
    """A GET of `path` on `server`: no answer (with `what`, any but a 2xx: `SERVER: WHAT: …`) is one line."""
    reply = call(session.client, "GET", server + path, headers, session.timeout, params=params)
    if isinstance(reply, str):
        raise TranscriptError(f"{server}: {reply}")
    if what is not None and not reply.is_success:
        raise TranscriptError(f"{server}: {what}: the server answered {answered(reply)}")
    return reply


def check_server(session: Session, server: str, path: str, headers: Mapping[str, str], *, store: str,
                 is_version: Callable[[str], bool]) -> None:
    """One line (`TranscriptError`) unless `GET path` answers a version: the server is down, fails or is not `store`."""
    reply = get(session, server, path, headers)
    if reply.status_code >= 500:  # noqa: PLR2004  (a server error, not a missing page)
        raise TranscriptError(f"{server}: the server answered {answered(reply)}")
    if not is_version(reply.text.strip() if reply.is_success else ""):
        raise TranscriptError(f"{server}: not {store} (GET {path} answered {answered(reply)}"
                              f"{', not a version' if reply.is_success else ''})")


def check_held(reply: httpx.Response, server: str, what: str, *, store: str, keys: Keys,
               headers: Mapping[str, str]) -> None:
    """One line unless `reply` found `what` on the `store` server; a refusal of a request without a key says why."""
    if reply.status_code == NOT_FOUND:
        raise TranscriptError(f"{server}: no {what} on this {store} server")
    if not reply.is_success:
        key = "" if headers else f" (no key sent: {keys.secrets[0]} goes only to the server {keys.servers[0]} names)"
        raise TranscriptError(f"{server}: {what}: the server answered "
                              f"{answered(reply)}{key if reply.status_code in (401, 403) else ''}")


class HostedStore(FileStore):
    """A hosted store, read from its exports and written to through its SDK: `NAME`, `NAME:URL` or `NAME-json:FILE`."""

    keys: Keys

    def target(self, text: str, env: Mapping[str, str]) -> Target | None:
        """`--to TEXT` as this store's target: `NAME`, `NAME:URL` or `NAME-json:FILE`.

        `NAME` takes the server and keys from the environment; `NAME-json:FILE` writes what would be
        sent to a file. None when `text` is not one of these; a `ConfigError` naming the variables to set when the
        server or a key is missing.
        """
        name, keys = self.name, self.keys
        scheme, sep, rest = text.partition(":")
        if scheme == f"{name}-json" and sep and rest:
            return Target(name, text, rest, file=True)
        if scheme != name or (sep and not rest.startswith(("http://", "https://"))):
            return None
        host = rest if sep else keys.server(env)
        missing = ([] if host else [keys.servers[0]]) + [secret for secret in keys.secrets if not env.get(secret)]
        if missing:
            elsewhere = f" (and {keys.servers[0]} for a self-hosted one)" if keys.default else ""
            raise ConfigError(f"--to {name}: set {', '.join(missing)}{elsewhere}")
        parts = urlsplit(str(host))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"annotation target {name}: expected an http(s) URL, not {host!r}")
        location = str(host).rstrip("/")
        return Target(name, f"{name}:{location}", location)

    def send(self, target: Target, payloads: Sequence[Any], session: Session) -> Sent:
        """One batch: appended to the file, or delivered to the server."""
        return append_lines(Path(target.location), payloads) if target.file else self.deliver(target, payloads, session)

    def deliver(self, target: Target, payloads: Sequence[Any], session: Session) -> Sent:
        """One batch sent to the store's server through its SDK."""
        raise NotImplementedError


def append_lines(path: Path, items: Sequence[Any], count: int | None = None) -> Sent:
    """JSON lines appended for a batch of `count` (default: one per item); not retried: a full disk stays so."""
    count = len(items) if count is None else count
    try:
        with path.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(item, ensure_ascii=False, separators=(",", ":")) + "\n" for item in items)
    except OSError as exc:
        return Sent.failed(count, f"{path}: {exc.strerror or exc}", retry=False)
    return Sent.stored(count)
