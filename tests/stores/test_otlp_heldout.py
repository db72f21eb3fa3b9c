"""Recorded calls replayed through the real instrumentations: what a user's traces would hold.

Reads the project's recorded replies (`fixtures/responses/`) and, when the shared corpus sits beside
the clone (`../shared/corpus/responses`), its real recorded calls nobody on the project wrote as
more cases; `tests/stores/test_otlp_instrumentations.py` makes the same checks on the project's own
recorded traces. Every corpus response is asked for through the official `openai` client (with
the tools it echoes) under Traceloop's instrumentation, logfire's and the official one (content
opt-in on; it wraps Chat Completions only), exported over OTLP/HTTP to a local receiver. Expected:
one row per span and no error; no nameless tool and no pasted data URI; every plain record (nothing
the span cannot hold) renders as its raw record; the gzip-encoded bodies read as the Collector file;
an answer whose citations survive only as links has those pages as evidence. And each response,
streamed as the API streams it (Responses events; Chat Completions chunks ending with Perplexity's
`chat.completion.done`), reads as its final response.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.servers.instrumented_calls import corpus_records, lost_in_span, run

pytest.importorskip("opentelemetry.proto", reason="the otel extra (opentelemetry-proto) is not installed")

NAMES = ("traceloop", "logfire", "openai-v2")
_LINK = re.compile(r"\]\((https?://[^)\s]+)\)")
OFFLINE = tlmscore.Settings(offline=True)


def _rows(source: Any) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in tlmscore.prepare(source, OFFLINE).to_dict("records")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, recorded_responses: Path) -> Path:
    folder = tmp_path_factory.mktemp("heldout")
    calls = corpus_records(recorded_responses)
    (folder / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls), encoding="utf-8")
    for name in NAMES:
        run(name, folder / "calls.jsonl", folder / name)
    return folder


@cache
def _read(folder: Path, name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    calls = [json.loads(line) for line in (folder / name / "calls.jsonl").read_text(encoding="utf-8").splitlines()]
    raw = {r["response_id"]: r for r in _rows(calls)}
    return calls, _rows(folder / name / "traces.jsonl"), raw


@pytest.mark.parametrize("name", NAMES)
def test_every_span_reads_and_the_gzipped_bodies_read_alike(recorded: Path, name: str) -> None:
    calls, rows, _ = _read(recorded, name)
    assert rows and len(rows) >= len(calls) - 3 and all(r["error"] is None for r in rows)
    bodies = [r for b in sorted((recorded / name / "bodies").iterdir()) for r in _rows(b)]
    assert [(r["span_id"], r["prompt"]) for r in bodies] == [(r["span_id"], r["prompt"]) for r in rows]


@pytest.mark.parametrize("name", NAMES)
def test_no_nameless_tools_no_pasted_data_and_plain_records_equal(recorded: Path, name: str) -> None:
    calls, rows, raw = _read(recorded, name)
    by_id = {r["response_id"]: r for r in rows}
    for row in rows:
        assert '"name":null' not in row["prompt"] and ";base64," not in row["prompt"]
    plain = [c["response"]["id"] for c in calls if lost_in_span(c, name) is None and c["response"]["id"] in by_id]
    for rid in plain:
        assert (by_id[rid]["prompt"], by_id[rid]["response"]) == (raw[rid]["prompt"], raw[rid]["response"]), rid
    for rid, row in by_id.items():  # never a silent difference
        if (row["prompt"], row["response"]) != (raw[rid]["prompt"], raw[rid]["response"]):
            assert row["warnings"], rid


@pytest.mark.parametrize("name", ["traceloop", "logfire"])
def test_answers_with_links_have_evidence(recorded: Path, name: str) -> None:
    _, rows, _ = _read(recorded, name)
    linked = [r for r in rows if _LINK.search(r["response"] or "")]
    assert linked, "the corpus has web-search answers that cite pages by link"
    for row in linked:
        assert row["n_urls"] > 0, row["response_id"]
        assert any("the trace holds no search that found them" in w for w in row["warnings"])


def _responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The events the API streams for a response: created, each item added and done, then the terminal event."""
    opening = {**response, "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": opening}]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    status = response.get("status") or "completed"
    end = f"response.{status}" if status in ("completed", "incomplete", "failed") else "response.completed"
    events.append({"type": end, "response": response})
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def _chat_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """Chunks of a completion's text, then Perplexity's closing `chat.completion.done` with the whole message."""
    message = response["choices"][0]["message"]
    text = message.get("content") or ""
    top = {k: v for k, v in response.items() if k not in ("choices", "object")}
    halves = [text[: len(text) // 2], text[len(text) // 2:]]
    chunks = [{**top, "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": part}, "finish_reason": None}]} for part in halves]
    done = {**top, "object": "chat.completion.done", "choices": [
        {"index": 0, "message": message, "finish_reason": response["choices"][0].get("finish_reason")}]}
    return [*chunks, done]


def test_event_streams_read_as_their_final_responses(tmp_path: Path, recorded_responses: Path) -> None:
    calls = corpus_records(recorded_responses)
    for number, call in enumerate(calls):
        response = call["response"]
        events = _chat_events(response) if "choices" in response else _responses_events(response)
        path = tmp_path / f"stream-{number}.txt"
        path.write_text("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n", encoding="utf-8")
        [streamed] = _rows(path)
        [raw] = _rows([{"request": {}, "response": response}])
        assert (streamed["prompt"], streamed["response"], streamed["response_status"]) == \
            (raw["prompt"], raw["response"], raw["response_status"]), (number, response.get("id"))
