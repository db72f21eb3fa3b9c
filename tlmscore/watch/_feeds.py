"""What a watch reads: a store's calls newer than a cursor, and which of them already hold its annotations.

A `Feed` lists the calls that started at or after a time, oldest first, a page at a time, each as
a `Call` (its key, start and end times, the record the run scores, and the store's own metadata
for `--where`), and says which identities have annotated given calls (so a call is scored once per
identity, also after a kill between annotating and saving the cursor). A feed raises
`TranscriptError` when the store does not answer; the watch then waits and asks again.
"""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

import httpx

from tlmscore.errors import ConfigError
from tlmscore.stores import Read, Session, Target, credentials, keyed, parse_target, spans_records, with_window
from tlmscore.stores import mlflow as mlflow_store
from tlmscore.stores import phoenix as phoenix_store
from tlmscore.watch._state import parse_time

TIMEOUT = 60.0


@dataclass(frozen=True)
class Call:
    """One call a store holds: its key (span id), start and end (ISO 8601), the record read, the store's metadata."""

    key: str
    started: str
    ended: str | None
    read: Read
    extra: Mapping[str, Any] = field(default_factory=dict)


class Feed(Protocol):
    """A live store as a watch reads it."""

    address: str
    """The source as given (rows name it as their `source`)."""
    target: Target
    """Where the annotations go (the store's server, with its keys when they are for it)."""

    def newer(self, since: dt.datetime | None) -> Iterator[Call]:
        """The calls that started at or after `since` (None: all), oldest first."""
        ...

    def annotated(self, calls: Sequence[Call], name: str) -> dict[str, set[str]]:
        """The identities (Phoenix: identifiers, MLflow: sources) of the annotations called `name`, by call key."""
        ...

    def close(self) -> None:
        """Let go of the connection."""
        ...


def _user_metadata(span: Mapping[str, Any]) -> dict[str, Any]:
    """The span's OpenInference `metadata` attribute (a JSON object as text), for `--where metadata.KEY`."""
    attributes = span.get("attributes")
    value = attributes.get("metadata") if isinstance(attributes, Mapping) else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return dict(value) if isinstance(value, Mapping) else {}


class _StoreFeed:
    """What both stores' feeds share.

    The address without its query, where annotations go (with the keys that are for that server only),
    and one HTTP client to the store.
    """

    def __init__(self, address: str, env: Mapping[str, str], store: ModuleType, form: str) -> None:
        parts = urllib.parse.urlsplit(address)
        self.address = urllib.parse.urlunsplit(parts._replace(query=""))
        self._where = store.parse_address(self.address)
        back = store.CONNECTOR.back_to(self.address)
        if back is None:
            raise ConfigError(f"{address}: expected {form}")
        self.target: Target = keyed(parse_target(back, env), env, [self._where.base_url])
        allowed = credentials(store.KEYS, self._where.base_url, env, [self._where.base_url])
        self._headers: dict[str, str] = store.CONNECTOR.headers(env) if allowed else {}
        self._client = httpx.Client(timeout=TIMEOUT)
        self._session = Session(self._client, TIMEOUT, 0)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()


class PhoenixFeed(_StoreFeed):
    """A Phoenix project (`phoenix://HOST:PORT/PROJECT`): its LLM spans by start time, its span annotations."""

    def __init__(self, address: str, env: Mapping[str, str]) -> None:
        super().__init__(address, env, phoenix_store, "phoenix://HOST:PORT/PROJECT")

    def newer(self, since: dt.datetime | None) -> Iterator[Call]:
        """The project's LLM spans that started at or after `since`, oldest first."""
        windowed = with_window(self.address, since.isoformat() if since else None, None,
                               phoenix_store.DEFAULT_LIMIT)
        for number, span in enumerate(phoenix_store.newer_spans(windowed, self._session, self._headers), start=1):
            context = span.get("context")
            key = str(context.get("span_id") or "") if isinstance(context, Mapping) else ""
            read = next(iter(spans_records(iter([(number, span)]), phoenix_store.ORIGIN)), None)
            if not key or read is None:
                continue
            yield Call(key, str(span.get("start_time")), span.get("end_time"), read, _user_metadata(span))

    def annotated(self, calls: Sequence[Call], name: str) -> dict[str, set[str]]:
        """The identifiers of each span's annotations called `name`."""
        if not calls:
            return {}
        keys = [c.key for c in calls]
        return phoenix_store.annotation_identifiers(self.address, keys, name, self._session, self._headers)


class MlflowFeed(_StoreFeed):
    """An MLflow experiment (`mlflow://HOST:PORT/EXPERIMENT`): its traces' LLM spans by trace start, their feedback."""

    def __init__(self, address: str, env: Mapping[str, str]) -> None:
        super().__init__(address, env, mlflow_store, "mlflow://HOST:PORT/EXPERIMENT")

    def newer(self, since: dt.datetime | None) -> Iterator[Call]:
        """The LLM spans of the traces that started at or after `since`, oldest trace first."""
        windowed = with_window(self.address, since.isoformat() if since else None, None, mlflow_store.DEFAULT_LIMIT)
        number = 0
        for trace in mlflow_store.newer_traces(windowed, self._session, self._headers):
            info = trace["trace_info"]
            started, ended = _trace_times(info)
            for span_id, record, error in mlflow_store.span_records(trace, self._where.name):
                number += 1
                read = Read(number, record) if error is None else Read(number, error=error)
                tags = info.get("tags") if isinstance(info.get("tags"), Mapping) else {}
                yield Call(f"{info['trace_id']}/{span_id}", started, ended, read, dict(tags or {}))

    def annotated(self, calls: Sequence[Call], name: str) -> dict[str, set[str]]:
        """The sources of each span's feedback called `name` (the trace's feedback read whole)."""
        traces = sorted({c.key.split("/")[0] for c in calls})
        if not traces:
            return {}
        found = mlflow_store.feedback_sources(self._where.base_url, traces, name, self._session, self._headers)
        return {c.key: found.get(c.key.split("/")[1], set()) for c in calls}


def _trace_times(info: Mapping[str, Any]) -> tuple[str, str | None]:
    """A trace's start (ISO 8601: its `request_time`) and end (plus its `execution_duration`, `"1.5s"`, when given)."""
    start = parse_time(str(info.get("request_time")))
    duration = str(info.get("execution_duration") or "")
    end = start + dt.timedelta(seconds=float(duration[:-1])) if duration.endswith("s") else None
    return start.isoformat(), end.isoformat() if end is not None else None


def open_feed(address: str, env: Mapping[str, str]) -> Feed:
    """The feed of a live address; one `ConfigError` line naming the sources there are."""
    scheme = urllib.parse.urlsplit(address).scheme.lower()
    if scheme in ("phoenix", "phoenixs"):
        return PhoenixFeed(address, env)
    if scheme in ("mlflow", "mlflows"):
        return MlflowFeed(address, env)
    raise ConfigError(f"{address}: watch reads phoenix://HOST:PORT/PROJECT or mlflow://HOST:PORT/EXPERIMENT")
