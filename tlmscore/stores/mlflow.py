"""MLflow Tracing: an experiment's traces as a source (`mlflow://HOST:PORT/EXPERIMENT`), feedback as write-back.

Reading: the experiment (by name, or by id) is looked up, then its traces are listed oldest
first with `POST /api/3.0/mlflow/traces/search` (`page` of them a request, default 100, with the
page token the server hands back) and each page fetched whole with `GET
/api/3.0/mlflow/traces/batchGet`: two requests per 100 traces, so 100,000 traces are 2,000
requests and each trace is downloaded once. `?since=ISO&until=ISO&limit=N` (the command line's
`--since`, `--until`, `--limit`) bound the window and the count of traces.

Each LLM span of a trace (`mlflow.spanType` `LLM` or `CHAT_MODEL`, as `mlflow.openai.autolog()`
writes the `openai` client's calls) is one record: `mlflow.spanInputs` are the keyword arguments of
the call (the request) and `mlflow.spanOutputs` the `Response` or Chat Completion the client
returned. The row's `trace_id` is MLflow's trace id (`tr-…`) and `span_id` the span's (16 hex).

Writing: one feedback assessment per row, on its trace and span (`POST
/api/3.0/mlflow/traces/{trace_id}/assessments`): name `tlmscore.<scorer>`, source `CODE` /
`tlmscore`, the score as the value (`not scorable` when there is none), the explanation as the
rationale, the label and record id as metadata. The batch's traces are read first, and a
feedback tlmscore wrote earlier on the same span with the same name is updated (`PATCH`) rather
than added to: a re-run or a replay leaves one per span.

`MLFLOW_TRACKING_TOKEN` (a bearer token), or `MLFLOW_TRACKING_USERNAME` and `_PASSWORD` (basic
auth), are sent only to the server `MLFLOW_TRACKING_URI` names, or, when it is not set, to the one
MLflow server the command line names.
"""

from __future__ import annotations

import base64
import os
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from tlmscore.errors import TranscriptError
from tlmscore.stores import mlflow_export
from tlmscore.stores._http import NOT_FOUND, RETRY_STATUS, answered, call, check_held, check_server, get, sent
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
from tlmscore.stores.mlflow_attachments import fetcher, with_media
from tlmscore.stores.otlp_spans import attributes_of
from tlmscore.stores.reading import Read, SourceReader, json_cell

__all__ = ["CONNECTOR", "MlflowConnector", "assessment", "feedback_sources", "newer_traces", "parse_address",
           "read_live", "span_records"]

ORIGIN = "mlflow"
SOURCE_ID = "tlmscore"
DEFAULT_LIMIT = 100_000
DEFAULT_PAGE = 100
READ_TIMEOUT = 120.0
LLM_SPANS = frozenset({"LLM", "CHAT_MODEL"})
KEYS = Keys(secrets=("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"),
            servers=("MLFLOW_TRACKING_URI",))
_API = "/api/3.0/mlflow/traces"


def parse_address(address: str) -> LiveAddress:
    """The parts of a `mlflow://HOST:PORT/EXPERIMENT[?since=&until=&limit=&page=]` address (`mlflows://`: https)."""
    return LiveAddress.parse(address, form="mlflow://HOST:PORT/EXPERIMENT", secure="mlflows", limit=DEFAULT_LIMIT,
                             page=DEFAULT_PAGE, nested=True)


def experiment_id(where: LiveAddress, session: Session, headers: Mapping[str, str]) -> str:
    """The id of the address's experiment (its name, else an id); one line when there is none."""
    check_server(session, where.base_url, "/version", headers, store="an MLflow server",
                 is_version=lambda text: text[:1].isdigit() and "." in text and len(text) <= 40)  # noqa: PLR2004
    api = "/api/2.0/mlflow/experiments"
    reply = get(session, where.base_url, f"{api}/get-by-name", headers, {"experiment_name": where.name})
    if reply.status_code == NOT_FOUND and where.name.isdigit():
        reply = get(session, where.base_url, f"{api}/get", headers, {"experiment_id": where.name})
    check_held(reply, where.base_url, f"experiment {where.name!r}", store="MLflow", keys=KEYS,
               headers=headers)
    return str(reply.json()["experiment"]["experiment_id"])


def _traces(where: LiveAddress, exp_id: str, session: Session, headers: Mapping[str, str]) -> Iterator[Any]:
    """The experiment's traces (with their spans), oldest first, `page` at a time, at most `limit`."""
    location = {"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": exp_id}}
    bounds = [f"trace.timestamp_ms {op} {int(when.timestamp() * 1000)}"
              for op, when in ((">=", where.since), ("<", where.until)) if when is not None]
    body: dict[str, Any] = {"locations": [location], "order_by": ["timestamp_ms ASC", "request_id ASC"],
                            "filter": " AND ".join(bounds) or None}
    given = 0
    while given < where.limit:
        body["max_results"] = min(where.page, where.limit - given)
        found = call(session.client, "POST", f"{where.base_url}{_API}/search", headers, session.timeout, json=body)
        if isinstance(found, str) or not found.is_success:
            why = found if isinstance(found, str) else f"the server answered {answered(found)}"
            raise TranscriptError(f"{where.base_url}: traces of experiment {where.name!r}: {why}")
        page = found.json()
        ids = [info["trace_id"] for info in page.get("traces") or []]
        if ids:
            reply = get(session, where.base_url, f"{_API}/batchGet", headers, {"trace_ids": ids},
                        what=f"traces {ids[0]}…")
            by_id = {t["trace_info"]["trace_id"]: t for t in reply.json().get("traces") or []}
            yield from (by_id[i] for i in ids if i in by_id)
            given += len(ids)
        if not ids or not page.get("next_page_token"):
            return
        body["page_token"] = page["next_page_token"]


def _hex(value: Any) -> str | None:
    """An id as MLflow's API writes it (base64 bytes) in hex."""
    try:
        return base64.b64decode(str(value), validate=True).hex() if value else None
    except ValueError:
        return None


def _attributes(span: Mapping[str, Any]) -> dict[str, Any]:
    """A span's attributes: key-value pairs (the API), or an object of JSON texts (`Span.to_dict`, exports)."""
    given = span.get("attributes")
    if isinstance(given, Mapping):
        return {str(key): json_cell(value) for key, value in given.items()}
    return attributes_of(given)


def _with_streamed_calls(response: dict[str, Any], events: Any) -> dict[str, Any]:
    """A streamed chat completion with the tool calls MLflow's aggregate dropped, from its chunk events."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not any(isinstance(c, dict) and c.get("finish_reason") == "tool_calls"
                                                and not (c.get("message") or {}).get("tool_calls") for c in choices):
        return response
    calls: dict[int, dict[int, dict[str, Any]]] = {}
    empty = {"name": "", "arguments": ""}
    for event in events or []:
        chunk = json_cell(_attributes(event).get("mlflow.chunk.value")) if isinstance(event, Mapping) else None
        for choice in chunk.get("choices") or [] if isinstance(chunk, dict) else []:
            for delta in (choice.get("delta") or {}).get("tool_calls") or []:
                call = calls.setdefault(int(choice.get("index") or 0), {}).setdefault(
                    int(delta.get("index") or 0), {"id": "", "type": "function", "function": dict(empty)})
                call["id"] = delta.get("id") or call["id"]
                function = delta.get("function") or {}
                for key in empty:
                    call["function"][key] += function.get(key) or ""
    if not calls:
        return response
    rebuilt = [{**c, "message": {**(c.get("message") or {}), "tool_calls": list(calls[c.get("index", 0)].values())}}
               if isinstance(c, dict) and c.get("index", 0) in calls else c for c in choices]
    return {**response, "choices": rebuilt}


def span_records(trace: Mapping[str, Any], source: str) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
    """(span id, record, error) for each LLM span of a trace (`trace_info`, or an export's `info`), in start order."""
    trace_id = str((trace.get("trace_info") or trace.get("info") or {})["trace_id"])
    spans = sorted(trace.get("spans") or [], key=lambda s: int(s.get("start_time_unix_nano") or 0))
    for span in spans:
        attributes = _attributes(span)
        if attributes.get("mlflow.spanType") not in LLM_SPANS:
            continue
        span_id = _hex(span.get("span_id")) or ""
        request, response = attributes.get("mlflow.spanInputs"), attributes.get("mlflow.spanOutputs")
        if not isinstance(response, dict) or not ("output" in response or "choices" in response):
            status = (span.get("status") or {}).get("message")
            yield span_id, None, (f"span {span_id}: the LLM call failed: {status}" if status else
                                  f"span {span_id}: its outputs hold no Response or Chat Completion")
            continue
        response = _with_streamed_calls(response, span.get("events"))
        metadata = {"name": span.get("name"), "experiment": source, "start_time_unix_nano":
                    span.get("start_time_unix_nano"), "parent_id": _hex(span.get("parent_span_id"))}
        yield span_id, {"id": span_id, "request": request if isinstance(request, dict) else {},
                        "response": response, "origin": ORIGIN, "trace_id": trace_id, "span_id": span_id,
                        "metadata": {k: v for k, v in metadata.items() if v is not None}}, None


def read_live(address: str, env: Mapping[str, str] | None = None) -> Iterator[Read]:
    """The LLM spans of an experiment's traces, oldest trace first, as records (origin `mlflow`)."""
    where = parse_address(address)
    env = os.environ if env is None else env
    headers = CONNECTOR.headers(env) if credentials(KEYS, where.base_url, env, [where.base_url]) else {}
    number = 0
    with httpx.Client(timeout=READ_TIMEOUT) as client:
        session = Session(client, READ_TIMEOUT, 0)
        exp_id = experiment_id(where, session, headers)
        fetch = fetcher(where.base_url, session, headers)
        for trace in _traces(where, exp_id, session, headers):
            for _, record, error in span_records(trace, where.name):
                number += 1
                yield Read(number, with_media(record, fetch)) if record is not None else Read(number, error=error)


def newer_traces(address: str, session: Session, headers: Mapping[str, str]) -> Iterator[Any]:
    """The experiment's traces (with their spans) that started at or after the address's `since`, oldest first.

    What `tlmscore watch` polls; `span_records` makes each trace's LLM spans records.
    """
    where = parse_address(address)
    return _traces(where, experiment_id(where, session, headers), session, headers)


def feedback_sources(base_url: str, trace_ids: Sequence[str], name: str, session: Session,
                     headers: Mapping[str, str]) -> dict[str, set[str]]:
    """The sources (`source_id`) of the feedback called `name` on the traces' spans: span id → sources."""
    found: dict[str, set[str]] = {}
    for start in range(0, len(trace_ids), 50):
        batch = {"trace_ids": list(trace_ids[start:start + 50])}
        reply = get(session, base_url, f"{_API}/batchGet", headers, batch, what="assessments")
        for trace in reply.json().get("traces") or []:
            for item in trace["trace_info"].get("assessments") or []:
                if item.get("assessment_name") == name and "feedback" in item:
                    key = str(item.get("span_id") or "")
                    found.setdefault(key, set()).add(str((item.get("source") or {}).get("source_id")))
    return found


def assessment(annotation: Annotation) -> dict[str, Any] | None:
    """One annotation as an MLflow feedback assessment; None without a trace id."""
    if not annotation.trace_id:
        return None
    body: dict[str, Any] = {
        "assessment_name": annotation.name, "trace_id": annotation.trace_id,
        "source": {"source_type": "CODE", "source_id": (annotation.evaluator or {}).get("id", SOURCE_ID)},
        "feedback": {"value": annotation.label if annotation.score is None else annotation.score},
        "rationale": annotation.explanation,
        "metadata": {"label": annotation.label, "tlmscore.record.id": annotation.row_id,
                     **{f"evaluator.{k}": v for k, v in (annotation.evaluator or {}).items()}}}
    if annotation.span_id:
        body["span_id"] = annotation.span_id
    return body


def _earlier(target: Target, payloads: Sequence[dict[str, Any]], session: Session) -> dict[tuple[Any, ...], str] | Sent:
    """The feedback tlmscore wrote before on the batch's traces, by (trace, span, name): its assessment id."""
    ids = sorted({p["trace_id"] for p in payloads})
    reply = call(session.client, "GET", f"{target.location}{_API}/batchGet", target.headers, session.timeout,
                 params={"trace_ids": ids})
    if isinstance(reply, str) or not reply.is_success:
        return sent(reply, len(payloads))
    found: dict[tuple[Any, ...], str] = {}
    sources = {p["source"]["source_id"] for p in payloads}  # tlmscore's, or a watch's evaluator identity
    for trace in reply.json().get("traces") or []:
        for item in trace["trace_info"].get("assessments") or []:
            source = (item.get("source") or {}).get("source_id")
            if source in sources and "feedback" in item:
                found[item["trace_id"], item.get("span_id"), item["assessment_name"], source] = item["assessment_id"]
    return found


def _write(target: Target, payload: dict[str, Any], earlier: str | None, session: Session) -> Failure | None:
    """One assessment added, or the one written earlier updated."""
    url = f"{target.location}{_API}/{urllib.parse.quote(payload['trace_id'], safe='')}/assessments"
    if earlier is None:
        reply = call(session.client, "POST", url, target.headers, session.timeout, json={"assessment": payload})
    else:
        body = {"assessment": {**payload, "assessment_id": earlier}, "update_mask": "feedback,rationale,metadata"}
        reply = call(session.client, "PATCH", f"{url}/{earlier}", target.headers, session.timeout, json=body)
    if isinstance(reply, str):
        return Failure(reply, retry=True)
    if reply.status_code == NOT_FOUND:
        return Failure(f"trace {payload['trace_id']} is not in this MLflow server", retry=False)
    return None if reply.is_success else Failure(answered(reply), reply.status_code in RETRY_STATUS)


def _export_read(address: str, env: Mapping[str, str] | None = None) -> Iterator[Read]:
    """The LLM spans of an export's traces, each read as a live read reads it.

    Where `MLFLOW_TRACKING_URI` names an http(s) server (MLflow's own setting of the server that holds
    the traces), the attachments are fetched from it as a live read fetches them; otherwise each record
    that has any says so in a warning.
    """
    env = os.environ if env is None else env
    server = env.get("MLFLOW_TRACKING_URI", "").rstrip("/")
    if not server.startswith(("http://", "https://")):
        yield from mlflow_export.read(address, span_records)
        return
    headers = CONNECTOR.headers(env) if credentials(KEYS, server, env, [server]) else {}
    with httpx.Client(timeout=READ_TIMEOUT) as client:
        fetch = fetcher(server, Session(client, READ_TIMEOUT, 0), headers)
        yield from mlflow_export.read(address, span_records, lambda record: with_media(record, fetch))


class MlflowConnector:
    """MLflow: an experiment's traces in, feedback assessments out."""

    name = "mlflow"
    origins = (ORIGIN,)
    readers = (SourceReader("mlflow", lambda _: False, read_live, schemes=("mlflow", "mlflows")),
               SourceReader("mlflow-export", mlflow_export.detect, _export_read,
                            wants="`info` and `data.spans` (Trace.to_json), or `trace_id` (tr-…) with `trace` or "
                                  "`spans` (search_traces)"))
    keys = KEYS
    batch_size = 100
    forms = ("mlflow://HOST:PORT",)
    annotates = "trace"

    def target(self, text: str, env: Mapping[str, str]) -> Target | None:
        """`mlflow://HOST:PORT`, `mlflows://HOST` or `mlflow:http(s)://HOST[:PORT]`."""
        return live_target(text, self.name)

    def back_to(self, source: str | None) -> str | None:
        """The server of a live `mlflow://` (or `mlflows://`) address, as a target."""
        return live_origin(source, self.name)

    def headers(self, env: Mapping[str, str]) -> dict[str, str]:
        """`MLFLOW_TRACKING_TOKEN` as a bearer token, else the user name and password as basic auth."""
        token, user, password = (env.get(name, "").strip() for name in KEYS.secrets)
        if token:
            return {"Authorization": f"Bearer {token}"}
        if user and password:
            return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")}
        return {}

    def check(self, address: str, session: Session, headers: Mapping[str, str]) -> None:
        """The server answers as MLflow and holds the experiment."""
        experiment_id(parse_address(address), session, headers)

    def payload(self, annotation: Annotation) -> Any | None:
        """The feedback assessment (rows without a trace id have none)."""
        return assessment(annotation)

    def send(self, target: Target, payloads: Sequence[Any], session: Session) -> Sent:
        """Each assessment added or updated in turn; a failure that may pass stops the batch there."""
        earlier = _earlier(target, payloads, session)
        if isinstance(earlier, Sent):
            return earlier
        results: list[Failure | None] = []
        for payload in payloads:
            failed = _write(target, payload, earlier.get((payload["trace_id"], payload.get("span_id"),
                                                          payload["assessment_name"], payload["source"]["source_id"])),
                            session)
            results.append(failed)
            if failed is not None and failed.retry:
                results += [failed] * (len(payloads) - len(results))
                break
        return Sent(tuple(results))


CONNECTOR = MlflowConnector()
