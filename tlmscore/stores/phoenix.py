"""Arize Phoenix: a live server as a source (`phoenix://HOST:PORT/PROJECT`) and span annotations as write-back.

Reading: the project's LLM spans through Phoenix's REST API, `GET /v1/projects/{project}/spans`
sorted by start time, oldest first, a page at a time with the cursor the server hands back, so
each span is downloaded once (100,000 spans: 100 requests of 1,000) and memory stays bounded by
a page. The address's query holds the window and the cap (`?since=ISO&until=ISO&limit=N`, which
the command line's `--since`, `--until` and `--limit` add, and `page=N`, at most 1,000). The
spans are read as Phoenix's exports are (`tlmscore.stores.openinference.spans_records`), origin `phoenix`.

Writing: one span annotation per row with a span id, `POST /v1/span_annotations?sync=true`, 100
a request: name `tlmscore.<scorer>`, annotator kind CODE, score, label and explanation, and the
fixed identifier `tlmscore`, so a re-run or a replay updates the annotation Phoenix keeps per
(span, name, identifier) instead of adding one.

`PHOENIX_API_KEY` is sent (as a bearer token) only to the server `PHOENIX_ENDPOINT` (or
`PHOENIX_COLLECTOR_ENDPOINT`) names, or, when neither is set, to the one Phoenix server the
command line names. Before any work, `check` asks `/arize_phoenix_version` and the project, so a
server that is down, answers 500 or is not Phoenix is one line.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from tlmscore.errors import TranscriptError
from tlmscore.stores._http import NOT_FOUND, call, check_held, check_server, get, sent
from tlmscore.stores.base import (
    Annotation,
    Failure,
    Keys,
    LiveAddress,
    Sent,
    Session,
    Target,
    credentials,
    live_origin,
    live_target,
)
from tlmscore.stores.openinference import spans_records
from tlmscore.stores.reading import Read, SourceReader, plain

__all__ = ["CONNECTOR", "DEFAULT_LIMIT", "DEFAULT_PAGE", "IDENTIFIER", "PhoenixConnector", "annotation_identifiers",
           "newer_spans", "parse_address", "read_live", "span_annotation"]

ORIGIN = "phoenix"
DEFAULT_LIMIT = 100_000
DEFAULT_PAGE = 1000
"""Spans asked for in one request (Phoenix answers at most 1,000)."""
IDENTIFIER = "tlmscore"
READ_TIMEOUT = 120.0
KEYS = Keys(secrets=("PHOENIX_API_KEY",), servers=("PHOENIX_ENDPOINT", "PHOENIX_COLLECTOR_ENDPOINT"))
_VERSION = re.compile(r"^\d+\.\d+")
_MISSING = re.compile(r"Spans with IDs (.+) do not exist")
_SPAN_ID = re.compile(r"^[0-9a-f]{16}$")


def parse_address(address: str) -> LiveAddress:
    """The parts of a `phoenix://HOST:PORT/PROJECT[?since=&until=&limit=&page=]` address (`phoenixs://`: https)."""
    return LiveAddress.parse(address, form="phoenix://HOST:PORT/PROJECT", secure="phoenixs", limit=DEFAULT_LIMIT,
                             page=DEFAULT_PAGE)


def _project(where: LiveAddress) -> str:
    return f"/v1/projects/{urllib.parse.quote(where.name, safe='')}"


def _check(where: LiveAddress, session: Session, headers: Mapping[str, str]) -> None:
    """One line (`TranscriptError`) unless the server answers with Phoenix's version and holds the project."""
    check_server(session, where.base_url, "/arize_phoenix_version", headers, store="a Phoenix server",
                 is_version=lambda text: bool(_VERSION.match(text)))
    reply = get(session, where.base_url, _project(where), headers)
    check_held(reply, where.base_url, f"project {where.name!r}", store="Phoenix", keys=KEYS, headers=headers)


def _pages(where: LiveAddress, session: Session, headers: Mapping[str, str]) -> Iterator[dict[str, Any]]:
    """The window's LLM spans, oldest first, each once: the server's cursor from page to page."""
    params: dict[str, Any] = {"sort": "start_time", "order": "asc", "span_kind": "LLM",
                              "limit": min(where.page, where.limit)}
    params |= {k: v.isoformat() for k, v in (("start_time", where.since), ("end_time", where.until)) if v}
    path = f"{_project(where)}/spans"
    given = 0
    while given < where.limit:
        body = get(session, where.base_url, path, headers, params, what=f"project {where.name!r}").json()
        spans = [plain(dict(span)) for span in body.get("data") or []]
        starts = [str(span.get("start_time") or "") for span in spans]
        if starts != sorted(starts):
            raise TranscriptError(f"{where.base_url}: this Phoenix server does not list spans oldest first "
                                  "(sort=start_time): a newer Phoenix is needed")
        for span in spans[: where.limit - given]:
            given += 1
            yield span
        if not body.get("next_cursor") or not spans:
            return
        params["cursor"] = body["next_cursor"]


def read_live(address: str, env: Mapping[str, str] | None = None) -> Iterator[Read]:
    """The LLM spans of a Phoenix project, oldest first, as records (origin `phoenix`), a page at a time.

    The server is checked first (one line when it is down or not Phoenix); the key goes with the
    requests when it is for this server (`PHOENIX_ENDPOINT`, else the address given).
    """
    where = parse_address(address)
    env = os.environ if env is None else env
    headers = CONNECTOR.headers(env) if credentials(KEYS, where.base_url, env, [where.base_url]) else {}
    with httpx.Client(timeout=READ_TIMEOUT) as client:
        session = Session(client, READ_TIMEOUT, 0)
        _check(where, session, headers)
        yield from spans_records(enumerate(_pages(where, session, headers), start=1), ORIGIN)


def newer_spans(address: str, session: Session, headers: Mapping[str, str]) -> Iterator[dict[str, Any]]:
    """The project's LLM spans that started at or after the address's `since`, oldest first, a page at a time.

    What `tlmscore watch` polls: the raw spans (flattened by `openinference.spans_records`).
    """
    return _pages(parse_address(address), session, headers)


def annotation_identifiers(address: str, span_ids: Sequence[str], name: str, session: Session,
                           headers: Mapping[str, str]) -> dict[str, set[str]]:
    """The identifiers of the annotations called `name` each of `span_ids` holds (spans without one left out).

    `GET /v1/projects/{project}/span_annotations`, at most 1,000 spans a request, paged with the
    server's cursor; a failure is one `TranscriptError` line.
    """
    where = parse_address(address)
    path = f"{_project(where)}/span_annotations"
    found: dict[str, set[str]] = {}
    for start in range(0, len(span_ids), 1000):
        params: dict[str, Any] = {"span_ids": list(span_ids[start:start + 1000]),
                                  "include_annotation_names": [name], "limit": 10_000}
        while True:
            body = get(session, where.base_url, path, headers, params, what="span annotations").json()
            for item in body.get("data") or []:
                found.setdefault(str(item.get("span_id")), set()).add(str(item.get("identifier") or ""))
            if not body.get("next_cursor"):
                break
            params["cursor"] = body["next_cursor"]
    return found


def _span_id(value: str | None) -> str | None:
    """A span id as Phoenix keys spans: 16 lower-case hex digits (None when the row's is not one)."""
    text = (value or "").strip().lower().removeprefix("0x")
    return text if _SPAN_ID.match(text) and set(text) != {"0"} else None


def span_annotation(annotation: Annotation) -> dict[str, Any] | None:
    """One annotation as the body's `SpanAnnotationData`; None without a span id."""
    span_id = _span_id(annotation.span_id)
    if span_id is None:
        return None
    result: dict[str, Any] = {"label": annotation.label, "explanation": annotation.explanation}
    if annotation.score is not None:
        result["score"] = annotation.score
    metadata: dict[str, Any] = {"tlmscore.record.id": annotation.row_id}
    if annotation.evaluator:  # who scored it (`tlmscore watch`): its identity is the identifier
        metadata["evaluator"] = dict(annotation.evaluator)
    identifier = annotation.evaluator["id"] if annotation.evaluator else IDENTIFIER
    return {"name": annotation.name, "annotator_kind": "CODE", "span_id": span_id, "result": result,
            "identifier": identifier, "metadata": metadata}


class PhoenixConnector:
    """Phoenix: live projects in, span annotations out."""

    name = "phoenix"
    origins = (ORIGIN,)
    readers = (SourceReader("phoenix", lambda _: False, read_live, schemes=("phoenix", "phoenixs")),)
    keys = KEYS
    batch_size = 100
    forms = ("phoenix://HOST:PORT",)
    annotates = "span"

    def target(self, text: str, env: Mapping[str, str]) -> Target | None:
        """`phoenix://HOST:PORT`, `phoenixs://HOST` or `phoenix:http(s)://HOST[:PORT]`."""
        return live_target(text, self.name, path=True)

    def back_to(self, source: str | None) -> str | None:
        """The server of a live `phoenix://` (or `phoenixs://`) address, as a target."""
        return live_origin(source, self.name)

    def headers(self, env: Mapping[str, str]) -> dict[str, str]:
        """`PHOENIX_API_KEY` as a bearer token."""
        key = env.get(KEYS.secrets[0], "").strip()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def check(self, address: str, session: Session, headers: Mapping[str, str]) -> None:
        """The server answers as Phoenix and holds the project."""
        _check(parse_address(address), session, headers)

    def payload(self, annotation: Annotation) -> Any | None:
        """The span annotation (rows without a span id have none)."""
        return span_annotation(annotation)

    def send(self, target: Target, payloads: Sequence[Any], session: Session) -> Sent:
        """One request for the batch; spans Phoenix does not hold are left out and the rest sent again."""
        url = f"{target.location}/v1/span_annotations"
        reply = call(session.client, "POST", url, target.headers, session.timeout, json={"data": list(payloads)},
                     params={"sync": "true"})
        missing = _missing(reply)
        if not missing:
            return sent(reply, len(payloads))
        kept = [p for p in payloads if p["span_id"] not in missing]
        again = iter(self.send(target, kept, session).items if kept else ())
        return Sent(tuple(Failure(f"span {p['span_id']} is not in this Phoenix server", retry=False)
                          if p["span_id"] in missing else next(again) for p in payloads))


def _missing(reply: httpx.Response | str) -> set[str]:
    """The span ids a 404 of `POST /v1/span_annotations` names as missing (none when there is no answer).

    Phoenix answers its errors as plain text (`Spans with IDs a, b do not exist.`); the search also
    finds them in a JSON `detail`.
    """
    if isinstance(reply, str) or reply.status_code != NOT_FOUND:
        return set()
    found = _MISSING.search(reply.text)
    return {part.strip() for part in found.group(1).split(",")} if found else set()


CONNECTOR = PhoenixConnector()
