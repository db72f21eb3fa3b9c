"""The trace-store seam: the `Connector` protocol and the values every store deals in.

A connector is one trace store (as a `Recorder` of inspect_ai reads and writes one log format): it
reads its input (`readers`: live addresses such as `phoenix://HOST:PORT/PROJECT`, export files
recognised by their content), parses an address once (`target`), says which environment
variables hold its keys and which server they are for (`keys`), checks that a live source is
reachable and is that store before any work (`check`), and turns annotations into what the store
is sent (`payload`, `send`). What is the same for every store, the batches, retries, deadline,
counts and the side file, is `tlmscore.annotate`'s.

Keys are sent only to the server they are for (`Keys.server`), never to an address read from
data; the generic rule is `credentials`.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

import httpx

from tlmscore.errors import ConfigError, TranscriptError
from tlmscore.stores.reading import SourceReader

__all__ = ["Annotation", "Connector", "Failure", "Keys", "Sent", "Session", "Target", "credentials", "same_server",
           "server_of"]


@dataclass(frozen=True)
class Annotation:
    """One scored row's evaluation, as every store is told it.

    `trace_id` and `span_id` are the row's ids as the store that made them writes them (hex for
    OpenTelemetry stores, UUIDs for LangSmith, `tr-…` for MLflow traces); None when the row has none.
    """

    row_id: str
    name: str
    score: float | None
    label: str
    explanation: str
    response_id: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    evaluator: Mapping[str, str] | None = None
    """Who scored it (`tlmscore watch`): `id`, `scorer`, `version`, `settings`; None: the plain `tlmscore` annotator."""


def server_of(url: str) -> str:
    """The server of a URL, as keys are matched against it: its origin (scheme, host, port).

    Lower-cased, the default port written out; a URL that names no server is itself.
    """
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:  # a port that is not a number: no server to match
        return url.strip()
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        return url.strip()
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def same_server(one: str, other: str) -> bool:
    """Whether two URLs are on the same server (origin): a key for one may go to the other."""
    return server_of(one) == server_of(other)


@dataclass(frozen=True)
class Keys:
    """The environment variables a store authenticates with, and the server they are for.

    `secrets` hold keys (`PHOENIX_API_KEY`); the first of `servers` that is set names the server
    they are for (`PHOENIX_ENDPOINT`), else `default` (LangSmith's own API) does; with neither, they
    are for the one server of the store the command line names.
    """

    secrets: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()
    default: str | None = None

    def given(self, env: Mapping[str, str]) -> bool:
        """Whether any of the store's keys is set."""
        return any(env.get(name) for name in self.secrets)

    def server(self, env: Mapping[str, str]) -> str | None:
        """The server the keys are for, as configured (a variable, else the default); None when not configured."""
        return next((env[name].strip() for name in self.servers if env.get(name, "").strip()), self.default)


def credentials(keys: Keys, location: str, env: Mapping[str, str], named: Collection[str]) -> bool:
    """Whether a store's keys may be sent to the server at `location`.

    They may when it is the server they are configured for; when none is configured, when it is
    the only server of the store among `named` (the servers the command line or the caller gave,
    never addresses read from data). A `ConfigError` when keys are set, no server is configured
    and `named` holds two different servers: which one they are for must be said.
    """
    if not keys.given(env):
        return False
    configured = keys.server(env)
    if configured is not None:
        return same_server(configured, location)
    distinct = {server_of(url) for url in named}
    if len(distinct) > 1:
        raise ConfigError(f"{', '.join(keys.secrets)} would go to {len(distinct)} different servers "
                          f"({', '.join(sorted(distinct))}): set {keys.servers[0]} to the one the key is for")
    return distinct == {server_of(location)}


@dataclass(frozen=True)
class Target:
    """Where annotations go: a store, and a server (or a file) of it.

    `text` is the target as summaries and side files name it, and as `--to` reads it back (never
    a secret); `headers` are the credentials sent with each request, empty unless the store's keys
    are for this server (see `credentials`).
    """

    store: str
    text: str
    location: str
    file: bool = False
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Session:
    """What one delivery gives a store's `send` and `check`.

    The HTTP client (its timeout set), the request timeout in seconds, and the time stamped on
    events (Unix nanoseconds).
    """

    client: httpx.Client
    timeout: float
    time_unix_nano: int


class Failure(NamedTuple):
    """Why the store does not have an item, and whether sending it again may help.

    A timeout or a 503 may pass; a 401, or a span the store does not hold, will not.
    """

    reason: str
    retry: bool


@dataclass(frozen=True)
class Sent:
    """What sending one batch did: for each item, None when the store has it, else its `Failure`."""

    items: tuple[Failure | None, ...]

    @classmethod
    def stored(cls, count: int) -> Sent:
        """Every item of a batch of `count` stored."""
        return cls((None,) * count)

    @classmethod
    def failed(cls, count: int, reason: str, *, retry: bool) -> Sent:
        """No item of a batch of `count` stored, for one reason."""
        return cls((Failure(reason, retry),) * count)

    @classmethod
    def partly(cls, stored: int, count: int, reason: str, *, retry: bool) -> Sent:
        """The first `stored` items of a batch stored, the rest not, for one reason."""
        return cls((None,) * stored + (Failure(reason, retry),) * (count - stored))

    @property
    def count(self) -> int:
        """How many items the store has."""
        return sum(item is None for item in self.items)


@runtime_checkable
class Connector(Protocol):
    """One trace store: its inputs, its keys, and how scores go back onto its traces."""

    @property
    def name(self) -> str:
        """The registry name (`phoenix`)."""
        ...

    @property
    def origins(self) -> tuple[str, ...]:
        """The row origins (reader names) whose rows go back to this store."""
        ...

    @property
    def readers(self) -> tuple[SourceReader, ...]:
        """The store's own inputs: live addresses, its exports."""
        ...

    @property
    def keys(self) -> Keys:
        """The variables of its keys and of the server they are for."""
        ...

    @property
    def batch_size(self) -> int:
        """Annotations per `send`; 0 when the store takes none."""
        ...

    @property
    def forms(self) -> tuple[str, ...]:
        """The target forms `target` reads, as usage errors list them (`phoenix://HOST:PORT`)."""
        ...

    @property
    def annotates(self) -> str:
        """What a row needs an id of to be annotated (`span`, `trace`, `run`), as summaries say."""
        ...

    def target(self, text: str, env: Mapping[str, str]) -> Target | None:
        """`--to TEXT` as a target of this store; None when TEXT is not one of its forms.

        A `ConfigError` when it is one, but wrong or not configured.
        """
        ...

    def back_to(self, source: str | None) -> str | None:
        """The target text rows read from `source` (a row's `source`: the address read) go back to; None: nowhere."""
        ...

    def headers(self, env: Mapping[str, str]) -> dict[str, str]:
        """The store's keys as request headers (sent only where `credentials` allows)."""
        ...

    def check(self, address: str, session: Session, headers: Mapping[str, str]) -> None:
        """Raise one line (`TranscriptError`) unless the live source at `address` answers and is this store."""
        ...

    def payload(self, annotation: Annotation) -> Any | None:
        """What the store is sent for one annotation; None when the row lacks the ids it annotates by."""
        ...

    def send(self, target: Target, payloads: Sequence[Any], session: Session) -> Sent:
        """Send one batch (at most `batch_size` payloads); never raises for what the store answers."""
        ...


class FileStore:
    """What the stores read from files alone share: no live source to check, rows go back to the environment's store."""

    name: str

    def back_to(self, source: str | None) -> str | None:
        """Rows read from files go back to the store the environment names (the target `NAME`)."""
        return self.name

    def check(self, address: str, session: Session, headers: Mapping[str, str]) -> None:
        """The store is read from files: there is no live source to check."""
        raise NotImplementedError(address)


@dataclass(frozen=True)
class LiveAddress:
    """What a live store's address says: `SCHEME://HOST:PORT/NAME[?since=&until=&limit=&page=]`.

    `name` is what is read there (a Phoenix project, an MLflow experiment); the window and the caps
    come from the command line's `--since`, `--until` and `--limit` (`tlmscore.stores.reading.with_window`).
    """

    base_url: str
    name: str
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = 100_000
    page: int = 100

    @classmethod
    def parse(cls, address: str, *, form: str, secure: str, limit: int, page: int,
              nested: bool = False) -> LiveAddress:
        """The parts of `address` (`form` says its shape in an error; the scheme `secure` means https).

        `limit` and `page` are the defaults, `page` also the most; `nested` allows a `/` in the name.
        """
        url = urllib.parse.urlsplit(address)
        name = urllib.parse.unquote(url.path.strip("/"))
        if not url.netloc or not name or ("/" in name and not nested):
            raise TranscriptError(f"{address}: expected {form}")
        query = dict(urllib.parse.parse_qsl(url.query))
        unknown = sorted(set(query) - {"since", "until", "limit", "page"})
        if unknown:
            raise TranscriptError(f"{address}: unknown parameters {', '.join(unknown)}")
        return cls(live_server(url, secure), name, _time("since", query.get("since")),
                   _time("until", query.get("until")), _count("limit", query.get("limit"), limit),
                   min(_count("page", query.get("page"), page), page))


def live_server(url: urllib.parse.SplitResult, secure: str) -> str:
    """The server of a live store's address: https when its scheme is `secure` (`phoenixs`), else http."""
    return f"{'https' if url.scheme.lower() == secure else 'http'}://{url.netloc}"


def live_target(text: str, scheme: str, *, path: bool = False) -> Target | None:
    """A live store's annotation target, of store `S`: `S://HOST:PORT`, `Ss://HOST` or `S:http(s)://…`.

    None when `text` is not of the scheme `S`; `path` keeps a `S://HOST/PATH`'s path (a store behind a prefix).
    """
    name, sep, rest = text.partition(":")
    if name.lower() not in (scheme, scheme + "s") or not sep or not rest:
        return None
    if rest.startswith("//"):
        url = urllib.parse.urlsplit(text)
        rest = live_server(url, scheme + "s") + (url.path if path else "")
    parts = urllib.parse.urlsplit(rest)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"annotation target {rest!r}: expected {scheme}://HOST:PORT or {scheme}:http(s)://HOST:PORT")
    location = rest.rstrip("/")
    shown = f"{scheme}://{location.removeprefix('http://')}" if location.startswith("http://") else \
        f"{scheme}:{location}"
    return Target(scheme, shown, location)


def live_origin(source: str | None, scheme: str) -> str | None:
    """The server of a live `S://HOST` (or `Ss://HOST`) address read from a row, as a target of store `S`."""
    url = urllib.parse.urlsplit(source) if isinstance(source, str) else None
    if url is None or url.scheme.lower() not in (scheme, scheme + "s") or not url.netloc:
        return None
    return f"{scheme}://{url.netloc}" if url.scheme.lower() == scheme else f"{scheme}:https://{url.netloc}"


def _time(name: str, value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise TranscriptError(f"--{name} {value!r}: not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _count(name: str, value: str | None, default: int) -> int:
    try:
        number = int(value or default)
    except ValueError:
        raise TranscriptError(f"--{name} {value!r}: not a whole number") from None
    if number < 1:
        raise TranscriptError(f"--{name} {number}: must be at least 1")
    return number
