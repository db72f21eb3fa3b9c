"""Spans as real instrumentations write them: the project's own calls replayed under each, read back.

`fixtures/traces/<instrumentation>/` holds what `python -m tests.servers.instrumented_calls --fixtures`
recorded: the project's fixture records sent through the official `openai` client to a local fake
of the API under Traceloop's `opentelemetry-instrumentation-openai`, `logfire.instrument_openai`
and the official `opentelemetry-instrumentation-openai-v2` (with and without its content opt-in),
exported over OTLP/HTTP to a local receiver: the Collector's file export (`traces.jsonl`), the raw
request bodies (`bodies/`, gzip-encoded for Traceloop and logfire) and the calls sent
(`calls.jsonl`). Each recorded call is read both ways and compared with its raw record.
"""

from __future__ import annotations

import gzip
import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.servers.instrumented_calls import lost_in_span
from tests.servers.openai_server import OpenAIServer
from tests.support.paths import ROOT
from tlmscore.stores import READERS as REGISTRY
from tlmscore.stores import find_reader
from tlmscore.stores.openai import request_from

pytest.importorskip("opentelemetry.proto", reason="the otel extra (opentelemetry-proto) is not installed")

TRACES = ROOT / "fixtures" / "traces"
CONTENT = ("traceloop", "logfire", "openai-v2")
RESPONSES = ("traceloop", "logfire")


def _settings(tmp: Path | None = None) -> tlmscore.Settings:
    return tlmscore.Settings(offline=True, **({"cache_dir": tmp / "cache"} if tmp else {}))


def _records(frame: Any) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


@cache
def _read(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(the calls sent, the rows of the Collector file, the raw records' rows by response id)."""
    folder = TRACES / name
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = _records(tlmscore.prepare(folder / "traces.jsonl", _settings()))
    raw = {row["response_id"]: row for row in _records(tlmscore.prepare(calls, _settings()))}
    return calls, rows, raw


def _row(name: str, record_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the span's row, the raw record's row) of the call a fixture record (by id) made."""
    calls, rows, raw = _read(name)
    wanted = _fixture(record_id)["response"]["id"]
    assert any(c["response"]["id"] == wanted for c in calls), f"{record_id} was not sent under {name}"
    return next(r for r in rows if r["response_id"] == wanted), raw[wanted]


@cache
def _fixtures() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in [*TRACES.parent.glob("*.jsonl"), TRACES / "plain.jsonl"]:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                found.setdefault(record["id"], record)
    return found


def _fixture(record_id: str) -> dict[str, Any]:
    return _fixtures()[record_id]


@pytest.mark.parametrize("name", CONTENT)
def test_every_call_is_one_row_and_the_raw_bodies_read_as_the_collector_file(name: str) -> None:
    calls, rows, _ = _read(name)
    folder = TRACES / name
    spans = sum(len(s.get("spans") or []) for line in (folder / "traces.jsonl").read_text().splitlines()
                for r in json.loads(line)["resourceSpans"] for s in r["scopeSpans"])
    incomplete = sum(1 for c in calls if c["response"].get("status") == "incomplete")
    missing = incomplete if name == "traceloop" else 0  # Traceloop writes no span for an incomplete response
    assert len(rows) == len(calls) - missing and sorted(r["response_id"] for r in rows) == \
        sorted(c["response"]["id"] for c in calls if name != "traceloop" or c["response"].get("status") != "incomplete")
    streamed = sum(1 for c in calls if c["request"].get("stream"))
    assert streamed and spans == len(rows) + (streamed if name == "logfire" else 0)  # logfire: two spans a stream
    assert all(r["error"] is None for r in rows), [r["error"] for r in rows if r["error"]]
    assert {r["origin"] for r in rows} == {"otlp"}
    bodies = sorted((folder / "bodies").iterdir())
    assert all(find_reader(str(b)) is REGISTRY["otlp"] for b in bodies)
    from_bodies = [r for b in bodies for r in _records(tlmscore.prepare(b, _settings()))]
    assert [(r["span_id"], r["prompt"], r["warnings"]) for r in from_bodies] == \
        [(r["span_id"], r["prompt"], r["warnings"]) for r in rows]


@pytest.mark.parametrize("name", CONTENT)
def test_a_streamed_call_reads_as_the_same_call_not_streamed(name: str) -> None:
    calls, rows, _ = _read(name)
    by_id = {r["response_id"]: r for r in rows}
    pairs = [(c["response"]["id"], c["response"]["id"][:-1]) for c in calls if c["request"].get("stream")]
    assert len(pairs) >= 5
    for streamed, plain in pairs:
        assert (by_id[streamed]["prompt"], by_id[streamed]["response"]) == (by_id[plain]["prompt"],
                                                                             by_id[plain]["response"]), streamed


@pytest.mark.parametrize("name", CONTENT)
def test_plain_records_render_as_their_raw_records_do(name: str) -> None:
    """Every call whose span can hold all of it (`lost_in_span`) gives the raw record's prompt and response."""
    calls, rows, raw = _read(name)
    by_id = {r["response_id"]: r for r in rows}
    plain = [c["response"]["id"] for c in calls if lost_in_span(c, name) is None and c["response"]["id"] in by_id]
    assert len(plain) >= 5
    for rid in plain:
        assert (by_id[rid]["prompt"], by_id[rid]["response"]) == (raw[rid]["prompt"], raw[rid]["response"]), rid


@pytest.mark.parametrize("name", CONTENT)
def test_no_nameless_tools_and_no_pasted_data(name: str) -> None:
    _, rows, _ = _read(name)
    for row in rows:
        assert '"name":null' not in row["prompt"] and '"name": null' not in row["prompt"]
        assert ";base64," not in row["prompt"] and "data:image" not in row["prompt"]


def test_built_in_tool_definitions_logfire_keeps_are_declared_as_in_the_raw_record() -> None:
    declared_by = {"hr-file-search-results": "file_search", "web-search-jwst-sources": "web_search_call"}
    for record_id, declared in declared_by.items():
        span, raw = _row("logfire", record_id)
        assert f'"name":"{declared}"' in span["prompt"] and f'"name":"{declared}"' in raw["prompt"]
        tools = span["prompt"].split("<tools>")[1].split("</tools>")[0]
        assert tools in raw["prompt"]  # the same declarations, byte for byte
        assert any("offered built-in tools" in w for w in span["warnings"])


def test_a_function_tool_marked_not_strict_stays_not_strict() -> None:
    span, raw = _row("logfire", "plain-not-strict")
    assert '"strict":false' in raw["prompt"] and span["prompt"] == raw["prompt"]
    traceloop, _ = _row("traceloop", "plain-not-strict")  # Traceloop keeps no strict flag: the row says so
    assert any("without their `strict` flag" in w for w in traceloop["warnings"])


@pytest.mark.parametrize("name", RESPONSES)
def test_text_parts_of_one_message_are_joined_by_a_newline(name: str) -> None:
    span, raw = _row(name, "plain-two-parts")
    assert "Sync stopped on my laptop.\nWhat should I try first?" in span["prompt"]
    assert span["prompt"] == raw["prompt"]


@pytest.mark.parametrize("name", RESPONSES)
def test_media_render_as_placeholders_and_a_file_sent_inline_says_what_was_lost(name: str) -> None:
    span, raw = _row(name, "plain-images")
    assert "[image: image/png, " in span["prompt"] and span["prompt"] == raw["prompt"]
    span, raw = _row(name, "multimodal-expense-claim")
    assert "[image: https://images.example-shop.com/" in span["prompt"]
    assert "[file: file-SnkslA2NIC1sGy07Bh29v7]" in span["prompt"]
    lost = "was sent inline: the span keeps its name" if name == "traceloop" else "without its file name"
    assert any(lost in w for w in span["warnings"]), span["warnings"]
    shown = "[file: invoice-INV-2041.pdf]" if name == "traceloop" else "[file: application/pdf, 922 bytes, sha256:"
    assert shown in span["prompt"]  # never a bare [file]


def test_a_gzipped_body_is_read_by_its_content_whatever_its_name(tmp_path: Path) -> None:
    body = sorted((TRACES / "logfire" / "bodies").iterdir())[0]
    assert body.read_bytes()[:2] == b"\x1f\x8b"
    expected = _records(tlmscore.prepare(body, _settings()))
    for name in ("body.pb.gz", "body.binpb", "body.pb"):
        copy = tmp_path / name
        shutil.copy(body, copy)
        rows = _records(tlmscore.prepare(copy, _settings()))
        assert [r["span_id"] for r in rows] == [r["span_id"] for r in expected] and len(rows) == 16
        assert all(r["error"] is None for r in rows)
    plain = tmp_path / "plain.binpb"
    plain.write_bytes(gzip.decompress(body.read_bytes()))
    assert [r["prompt"] for r in _records(tlmscore.prepare(plain, _settings()))] == [r["prompt"] for r in expected]


def test_traceloop_calls_named_by_item_ids_are_matched_to_their_results_in_order() -> None:
    span, raw = _row("traceloop", "plain-function-history")
    assert span["prompt"] == raw["prompt"]
    said = " ".join(span["warnings"])
    assert "has no matching call" not in said and "matched in order" in said
    answer, _ = _row("traceloop", "plain-function-answer")  # the answer's own call: its call id is not kept
    assert any("named by their item ids" in w for w in answer["warnings"])


def test_the_official_instrumentation_without_its_opt_in_says_what_to_set() -> None:
    calls, rows, _ = _read("openai-v2-default")
    assert len(rows) == len(calls) and all(r["prompt"] is None for r in rows)
    for row in rows:
        assert "holds no message content" in row["error"]
        assert "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental" in row["error"]
        assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY" in row["error"]
        assert row["origin"] == "otlp" and row["span_id"]


@pytest.mark.parametrize("name", RESPONSES)
def test_answers_whose_citations_survive_only_as_links_have_their_pages_planned(name: str) -> None:
    span, raw = _row(name, "web-search-jwst-sources")
    assert raw["n_urls"] > 0 and span["n_urls"] > 0
    assert "the search that found them is not in the trace" in span["prompt"]
    assert any("the trace holds no search that found them" in w for w in span["warnings"])
    plain, _ = _row(name, "plain-string")
    assert plain["n_urls"] == 0  # an answer with no links plans nothing
    from tlmscore.evidence.layers import load_page_records

    pages = tlmscore.MemoryPages(load_page_records(TRACES.parent / "pages"))  # the pages, as fetched before
    rows = _records(tlmscore.prepare(TRACES / name / "traces.jsonl", _settings(), pages=pages))
    fetched = next(r for r in rows if r["response_id"] == span["response_id"])
    assert fetched["n_urls"] == span["n_urls"] and fetched["n_urls_ok"] > 0
    shown = fetched["prompt"].split("<cited_sources>")[1]
    assert "the largest, most powerful space telescope ever built" in shown  # the NASA page's text, as evidence


def test_hydrate_reads_a_linked_answer_from_its_stored_response(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    record = _fixture("web-search-jwst-sources")
    response, request = record["response"], record["request"]
    items = [{"id": f"msg_in_{n}", **item} for n, item in
             enumerate([{"role": "user", "content": request["input"]}] if isinstance(request["input"], str)
                       else request["input"])]
    stored = {**response, "tools": request.get("tools") or response.get("tools")}
    path = TRACES / "logfire" / "traces.jsonl"
    with OpenAIServer(tmp_path, stored={response["id"]: (stored, items)}) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-trace-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        rows = _records(tlmscore.prepare(path, _settings(tmp_path).model_copy(update={"hydrate": True})))
    filled = next(r for r in rows if r["response_id"] == response["id"])
    raw = _records(tlmscore.prepare([{"request": request_from(stored, items), "response": stored}],
                                    _settings(tmp_path)))[0]
    assert (filled["prompt"], filled["n_urls"]) == (raw["prompt"], raw["n_urls"])
    assert '"name": "web_search_call"' in filled["prompt"] and filled["origin"] == "otlp"
    assert not any("not in the trace" in w for w in filled["warnings"])
    others = [r for r in rows if r["response_id"] != response["id"] and str(r["response_id"]).startswith("resp_")]
    assert others and all(r["error"] is None and r["prompt"] for r in others)  # not stored: read from the span
    assert all(any("could not be pulled" in w and "read from the trace" in w for w in r["warnings"]) for r in others)


def test_an_image_the_openinference_instrumentation_redacted_is_said_to_be_redacted() -> None:
    """The OpenInference instrumentation replaces images it hides (or finds too long) with `__REDACTED__`."""
    from openinference.instrumentation.openai._image_utils import redact_images_from_request_parameters

    record = _fixture("plain-images")
    request = redact_images_from_request_parameters(record["request"], hide_input_images=False,
                                                    base64_image_max_length=16)
    assert "__REDACTED__" in json.dumps(request)  # the data URL was longer than the limit; the https URL stays
    span = {"name": "Response", "span_kind": "LLM", "context.span_id": "5f1d", "context.trace_id": "9a0e",
            "attributes.llm.model_name": "gpt-4.1-mini", "attributes.input.value": json.dumps(request),
            "attributes.output.value": json.dumps(record["response"])}
    from tlmscore.stores.openinference import span_record

    made = span_record(span)
    assert made is not None
    [out] = _records(tlmscore.prepare([made], _settings()))
    assert any("redacted 1 value(s)" in w for w in out["warnings"]), out["warnings"]
    assert "[image: https://images.example-shop.com/" in out["prompt"]
    clean = span_record({**span, "attributes.input.value": json.dumps(record["request"])})
    assert clean is not None and not clean["warnings"]


@pytest.mark.parametrize("name", CONTENT)
def test_a_row_that_differs_from_its_raw_record_says_what_the_span_lost(name: str) -> None:
    """Never a silent difference: where the span could not hold the call, the row's warnings say so."""
    calls, rows, raw = _read(name)
    by_id = {r["response_id"]: r for r in rows}
    differ = [by_id[c["response"]["id"]] for c in calls if c["response"]["id"] in by_id
              and (by_id[c["response"]["id"]]["prompt"], by_id[c["response"]["id"]]["response"])
              != (raw[c["response"]["id"]]["prompt"], raw[c["response"]["id"]]["response"])]
    assert differ  # the recordings hold calls the spans cannot hold whole
    assert all(r["warnings"] for r in differ), [r["response_id"] for r in differ if not r["warnings"]]


def test_a_chat_answer_whose_sources_survive_only_as_numbers_or_links_says_so() -> None:
    span, raw = _row("openai-v2", "chat-search-preview-ar")
    assert raw["n_urls"] > 0 and span["n_urls"] > 0  # its link is planned, as cited by the answer
    assert "the search that found them is not in the trace" in span["prompt"]
    numbered = [r for r in _read("openai-v2")[1] if r["response_id"] == "7c3a9e1f-2b4d-4f6a-8e1c-3d5b7f9a1c2e"]
    assert numbered and any("numbers its sources" in w for w in numbered[0]["warnings"])
