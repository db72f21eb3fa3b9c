"""A live Phoenix server as a source: `phoenix://HOST:PORT/PROJECT` (`phoenixs://` for https).

The address's query holds the window and the cap (`?since=ISO&until=ISO&limit=N`, which the
command line's `--since`, `--until` and `--limit` add); the API key comes from `PHOENIX_API_KEY`
and is sent only as the client's header. The LLM spans are fetched through `arize-phoenix-client`
(in one list: the client has no paged iterator) and read, oldest first, as an export's rows are.
"""

from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tlmscore.errors import TranscriptError
from tlmscore.sources._openinference import spans_records
from tlmscore.sources._tables import Read, plain

ORIGIN = "phoenix"
DEFAULT_LIMIT = 100_000
KEY_VARIABLE = "PHOENIX_API_KEY"


@dataclass(frozen=True)
class PhoenixAddress:
    """What a `phoenix://` address says: the server's base URL, the project, the window and the cap."""

    base_url: str
    project: str
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = DEFAULT_LIMIT


def _time(name: str, value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise TranscriptError(f"--{name} {value!r}: not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def parse_address(address: str) -> PhoenixAddress:
    """The parts of a `phoenix://HOST:PORT/PROJECT[?since=&until=&limit=]` address."""
    url = urllib.parse.urlsplit(address)
    project = urllib.parse.unquote(url.path.strip("/"))
    if not url.netloc or not project or "/" in project:
        raise TranscriptError(f"{address}: expected phoenix://HOST:PORT/PROJECT")
    query = dict(urllib.parse.parse_qsl(url.query))
    unknown = sorted(set(query) - {"since", "until", "limit"})
    if unknown:
        raise TranscriptError(f"{address}: unknown parameters {', '.join(unknown)}")
    try:
        limit = int(query.get("limit") or DEFAULT_LIMIT)
    except ValueError:
        raise TranscriptError(f"--limit {query['limit']!r}: not a whole number") from None
    if limit < 1:
        raise TranscriptError(f"--limit {limit}: must be at least 1")
    scheme = "https" if url.scheme.lower() == "phoenixs" else "http"
    return PhoenixAddress(f"{scheme}://{url.netloc}", project, _time("since", query.get("since")),
                          _time("until", query.get("until")), limit)


def with_window(address: str, since: str | None, until: str | None, limit: int | None) -> str:
    """`address` with the command line's window and cap in its query (values given only)."""
    given = {k: str(v) for k, v in (("since", since), ("until", until), ("limit", limit)) if v is not None}
    if not given:
        return address
    url = urllib.parse.urlsplit(address)
    query = dict(urllib.parse.parse_qsl(url.query)) | given
    return urllib.parse.urlunsplit(url._replace(query=urllib.parse.urlencode(query)))


def _spans(where: PhoenixAddress) -> list[dict[str, Any]]:
    import httpx  # noqa: PLC0415  (the client and its HTTP stack load only for a live source)
    from phoenix.client import Client  # noqa: PLC0415

    client = Client(base_url=where.base_url, api_key=os.environ.get(KEY_VARIABLE) or None)
    try:
        spans = client.spans.get_spans(project_identifier=where.project, start_time=where.since,
                                       end_time=where.until, span_kind="LLM", limit=where.limit, timeout=60)
    except httpx.HTTPStatusError as exc:
        raise TranscriptError(f"{where.base_url}: project {where.project!r}: the server answered "
                              f"{exc.response.status_code} {exc.response.reason_phrase}") from None
    except httpx.HTTPError as exc:
        raise TranscriptError(f"{where.base_url}: cannot read spans: {type(exc).__name__}: {exc}") from None
    rows = [plain(dict(span)) for span in spans]
    return sorted(rows, key=lambda s: (str(s.get("start_time") or ""), str(s.get("context", {}).get("span_id"))))


def read_live(address: str) -> Iterator[Read]:
    """The LLM spans of a Phoenix project, oldest first, as records (origin `phoenix`)."""
    where = parse_address(address)
    yield from spans_records(enumerate(_spans(where), start=1), ORIGIN)
