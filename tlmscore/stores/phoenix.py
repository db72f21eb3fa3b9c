"""A live Phoenix server as a source: `phoenix://HOST:PORT/PROJECT` (`phoenixs://` for https).

The address's query holds the window and the cap (`?since=ISO&until=ISO&limit=N`, which the
command line's `--since`, `--until` and `--limit` add, and `page=N`, the most spans held at once);
the API key comes from `PHOENIX_API_KEY` and is sent only as the client's header. The LLM spans
are fetched through `arize-phoenix-client`'s `get_spans` and read, oldest first, as an export's
rows are. That call lists spans newest first and offers no cursor, so the time window is read in
slices of at most `page` spans: a slice that holds more is halved, the older half read first. Memory
stays bounded by a page, however many spans the project holds.
"""

from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tlmscore.errors import TranscriptError
from tlmscore.sources._openinference import spans_records
from tlmscore.sources._tables import Read, plain

ORIGIN = "phoenix"
DEFAULT_LIMIT = 100_000
DEFAULT_PAGE = 1000
_EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_LATEST = dt.datetime(3000, 1, 1, tzinfo=dt.timezone.utc)
_TICK = dt.timedelta(microseconds=1)
Fetch = Callable[[dt.datetime, dt.datetime, int], list[dict[str, Any]]]
"""`fetch(start, end, limit)`: at most `limit` spans that started in `[start, end)`, in any order."""
KEY_VARIABLE = "PHOENIX_API_KEY"


@dataclass(frozen=True)
class PhoenixAddress:
    """What a `phoenix://` address says: the server's base URL, the project, the window and the cap."""

    base_url: str
    project: str
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = DEFAULT_LIMIT
    page: int = DEFAULT_PAGE


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
    unknown = sorted(set(query) - {"since", "until", "limit", "page"})
    if unknown:
        raise TranscriptError(f"{address}: unknown parameters {', '.join(unknown)}")
    limit, page = _count("limit", query, DEFAULT_LIMIT), _count("page", query, DEFAULT_PAGE)
    scheme = "https" if url.scheme.lower() == "phoenixs" else "http"
    return PhoenixAddress(f"{scheme}://{url.netloc}", project, _time("since", query.get("since")),
                          _time("until", query.get("until")), limit, page)


def _count(name: str, query: dict[str, str], default: int) -> int:
    try:
        value = int(query.get(name) or default)
    except ValueError:
        raise TranscriptError(f"--{name} {query[name]!r}: not a whole number") from None
    if value < 1:
        raise TranscriptError(f"--{name} {value}: must be at least 1")
    return value


def with_window(address: str, since: str | None, until: str | None, limit: int | None) -> str:
    """`address` with the command line's window and cap in its query (values given only)."""
    given = {k: str(v) for k, v in (("since", since), ("until", until), ("limit", limit)) if v is not None}
    if not given:
        return address
    url = urllib.parse.urlsplit(address)
    query = dict(urllib.parse.parse_qsl(url.query)) | given
    return urllib.parse.urlunsplit(url._replace(query=urllib.parse.urlencode(query)))


def _order(span: dict[str, Any]) -> tuple[str, str]:
    return str(span.get("start_time") or ""), str((span.get("context") or {}).get("span_id"))


def paged(fetch: Fetch, start: dt.datetime, end: dt.datetime, page: int, limit: int) -> Iterator[dict[str, Any]]:
    """The spans of `[start, end)`, oldest first, at most `limit`, holding at most a page at a time.

    A slice is read with room for one span more than a page: when it is full, it is halved and the
    older half read first. A slice of one microsecond that still holds more is read whole.
    """
    slices = [(start, end)]  # the oldest slice last: read next
    given = 0
    while slices and given < limit:
        lo, hi = slices.pop()
        spans = fetch(lo, hi, page + 1)
        if len(spans) > page and hi - lo > _TICK:
            middle = lo + (hi - lo) // 2
            slices += [(middle, hi), (lo, middle)]
            continue
        if len(spans) > page:
            spans = fetch(lo, hi, limit - given)
        for span in sorted(spans, key=_order)[: limit - given]:
            given += 1
            yield span


def _fetcher(where: PhoenixAddress) -> Fetch:
    """`get_spans` of the address's project (LLM spans), its HTTP errors as `TranscriptError`."""
    import httpx  # noqa: PLC0415  (the client and its HTTP stack load only for a live source)
    from phoenix.client import Client  # noqa: PLC0415

    client = Client(base_url=where.base_url, api_key=os.environ.get(KEY_VARIABLE) or None)

    def fetch(start: dt.datetime, end: dt.datetime, limit: int) -> list[dict[str, Any]]:
        try:
            spans = client.spans.get_spans(project_identifier=where.project, start_time=start, end_time=end,
                                           span_kind="LLM", limit=limit, timeout=60)
        except httpx.HTTPStatusError as exc:
            raise TranscriptError(f"{where.base_url}: project {where.project!r}: the server answered "
                                  f"{exc.response.status_code} {exc.response.reason_phrase}") from None
        except httpx.HTTPError as exc:
            raise TranscriptError(f"{where.base_url}: cannot read spans: {type(exc).__name__}: {exc}") from None
        return [plain(dict(span)) for span in spans]

    return fetch


def read_live(address: str) -> Iterator[Read]:
    """The LLM spans of a Phoenix project, oldest first, as records (origin `phoenix`), a page at a time."""
    where = parse_address(address)
    spans = paged(_fetcher(where), where.since or _EARLIEST, where.until or _LATEST, where.page, where.limit)
    yield from spans_records(enumerate(spans, start=1), ORIGIN)
