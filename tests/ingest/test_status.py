# ruff: noqa: RUF001  (Chinese and Japanese answers use full-width punctuation, as written)
"""The response status: read from real response shapes, written to `response_status`, told to scorers."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

import tlmscore
from tlmscore import Settings
from tlmscore.convert.registry import REGISTRY
from tlmscore.evidence.page import MemoryPages
from tlmscore.ingest import normalize_record
from tlmscore.ingest._status import ANSWER_ITEMS, record_status, response_status
from tlmscore.model import ResponseStatus, ScoringInput
from tlmscore.output import RowWriter
from tlmscore.scoring.base import Score

OFFLINE = Settings(offline=True)


def response(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A Responses API `Response` as the SDK dumps it, so only real shapes reach the tests."""
    body = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5-mini", "output": output,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], **fields}
    return Response.model_validate(body).model_dump(mode="json", exclude_none=True)


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": '{"q": "x"}'}


def completion(content: str | None, finish_reason: str, **message_fields: Any) -> dict[str, Any]:
    """A Chat Completions `ChatCompletion` as the SDK dumps it."""
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "deepseek-reasoner",
            "choices": [{"index": 0, "finish_reason": finish_reason,
                         "message": {"role": "assistant", "content": content, **message_fields}}]}
    return ChatCompletion.model_validate(body).model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize(("body", "value"), [
    (response([message("Paris.")], status="completed"), "completed"),
    (response([REASONING, CALL], status="completed"), "completed"),
    (response([message("Paris.")]), "completed"),
    (response([REASONING, message("Paris is the cap")], status="incomplete",
              incomplete_details={"reason": "max_output_tokens"}), "incomplete:max_output_tokens"),
    (response([message("I can")], status="incomplete", incomplete_details={"reason": "content_filter"}),
     "incomplete:content_filter"),
    (response([message("So")], status="incomplete", incomplete_details={"reason": "max_messages"}),
     "incomplete:max_messages"),
    (response([REASONING], status="incomplete", incomplete_details={"reason": "max_output_tokens"}),
     "incomplete:max_output_tokens"),
    (response([REASONING], status="completed", max_output_tokens=64,
              usage={"input_tokens": 9, "output_tokens": 64, "total_tokens": 73,
                     "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                     "output_tokens_details": {"reasoning_tokens": 64}}), "incomplete:max_output_tokens"),
    (response([], status="completed"), "incomplete:empty_output"),
    (response([REASONING, message("")], status="completed"), "incomplete:no_answer"),
    (response([message("<think>The user wants")], status="completed"), "incomplete:no_answer"),
    (response([message("Paris is")], status="incomplete"), "incomplete:unknown"),
    (response([message("Paris is") | {"status": "incomplete"}]), "incomplete:unknown"),
])
def test_responses_status_values(body: dict[str, Any], value: str) -> None:
    status = response_status(body)
    assert status.value == value
    assert status.error is None
    assert (status.warning is None) == (value == "completed")
    if status.warning:
        assert value.split(":", 1)[1] in status.warning


@pytest.mark.parametrize("state", ["queued", "in_progress", "cancelled"])
def test_unfinished_background_responses_have_no_answer(state: str) -> None:
    status = response_status(response([], status=state, background=True))
    assert status.value == state
    assert status.error is not None and state.replace("_", " ") in status.error


def test_failed_response_keeps_the_api_error_code_and_message() -> None:
    body = response([], status="failed", error={"code": "rate_limit_exceeded", "message": "Slow down, 42 req/s."})
    status = response_status(body)
    assert status.value == "failed"
    assert status.error == "response failed: rate_limit_exceeded: Slow down, 42 req/s."


@pytest.mark.parametrize(("body", "value"), [
    (completion("Paris.", "stop"), "completed"),
    (completion(None, "tool_calls", tool_calls=[{"id": "c1", "type": "function",
                                                 "function": {"name": "f", "arguments": "{}"}}]), "completed"),
    (completion(None, "function_call", function_call={"name": "f", "arguments": "{}"}), "completed"),
    (completion("Paris is the capital of", "length"), "incomplete:max_output_tokens"),
    (completion("", "content_filter"), "incomplete:content_filter"),
    (completion("", "stop"), "incomplete:no_answer"),
    (completion("<think>\nThe user asks about Paris.\n</think>\n\n", "stop"), "incomplete:no_answer"),
    (completion("<think>\nThe user asks about", "length"), "incomplete:max_output_tokens"),
])
def test_chat_finish_reason_is_mapped(body: dict[str, Any], value: str) -> None:
    status = response_status(body, fmt="chat")
    assert status.value == value
    assert status.error is None
    assert (status.warning is None) == (value == "completed")


def test_chat_error_finish_reason_of_compatible_servers_is_failed() -> None:
    body = {"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "error", "message": {
        "role": "assistant", "content": ""}, "error": {"code": 502, "message": "upstream provider timed out"}}]}
    status = response_status(body, fmt="chat")
    assert status.value == "failed"
    assert status.error == "response failed: 502: upstream provider timed out"


def test_unknown_finish_reason_is_completed_with_a_warning() -> None:
    status = response_status(completion("Fine.", "stop") | {"choices": [
        {"index": 0, "finish_reason": "eos_token", "message": {"role": "assistant", "content": "Fine."}}]},
        fmt="chat")
    assert status.value == "completed" and status.warning and "eos_token" in status.warning


@pytest.mark.parametrize(("record", "expected"), [
    ({"custom_id": "req-7", "response": {"status_code": 429, "request_id": "r", "body": {"error": {
        "message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}}, "error": None},
     "batch request 'req-7' failed: HTTP 429, rate_limit_exceeded: Rate limit reached"),
    ({"id": "batch_req_1", "custom_id": "req-8", "response": None,
      "error": {"code": "batch_expired", "message": "This request could not be executed before the deadline."}},
     "batch request 'req-8' failed: batch_expired: This request could not be executed before the deadline."),
    ({"error": {"message": "Unsupported parameter: 'temperature'", "type": "invalid_request_error",
                "param": "temperature", "code": None}},
     "record is an API error, not a response: invalid_request_error: Unsupported parameter: 'temperature'"),
    ({"request": {"input": "hi"}, "response": {"id": "resp_1", "object": "response", "status": "failed",
                                               "error": {"code": "server_error", "message": "Try again."}}},
     "response failed: server_error: Try again."),
])
def test_records_ingest_cannot_read_keep_the_api_error(record: dict[str, Any], expected: str) -> None:
    status = record_status(record)
    assert status is not None and status.value == "failed" and status.error == expected


def test_chat_completion_with_an_error_and_no_choices_is_failed() -> None:
    body = {"id": "gen-1", "object": "chat.completion", "choices": [],
            "error": {"code": 429, "message": "Provider returned error", "metadata": {"provider_name": "x"}}}
    status = record_status({"request": {"messages": []}, "response": body})
    assert status is not None and status.error == "record is an API error, not a response: 429: Provider returned error"


def test_the_answer_items_are_the_converters_of_kind_answer() -> None:
    assert {kind for kind, spec in REGISTRY.items() if spec.kind == "answer"} == ANSWER_ITEMS


@pytest.mark.parametrize(("item", "value"), [
    ({"type": "computer_call", "id": "cu_1", "call_id": "c1", "action": {"type": "screenshot"},
      "pending_safety_checks": [], "status": "completed"}, "completed"),
    ({"type": "web_search_call", "id": "ws_1", "status": "completed",
      "action": {"type": "search", "query": "x"}}, "incomplete:no_answer"),
])
def test_a_call_answers_and_a_search_does_not(item: dict[str, Any], value: str) -> None:
    assert response_status(response([item], status="completed")).value == value


def test_ingest_decides_the_status_with_the_records_place() -> None:
    failed = normalize_record(record("f", response([], status="failed", error={"code": "server_error",
                                                                                "message": "Try again."})),
                              source="calls.jsonl", line=3)
    assert failed.error is None  # read: it stays a link of its chain; its status says it has no answer
    assert failed.status == ResponseStatus("failed", error="calls.jsonl:3: response failed: server_error: Try again.")
    api = normalize_record({"error": {"code": "bad", "message": "No."}}, source="calls.jsonl", line=4)
    assert api.error == "calls.jsonl:4: record is an API error, not a response: bad: No."
    assert api.status is not None and api.status.error == api.error
    assert normalize_record([1], source="calls.jsonl", line=5).status is None


def test_the_pipeline_reads_the_status_ingest_decided_and_never_the_raw_record() -> None:
    from dataclasses import replace

    from tlmscore.pipeline import convert_record, record_row

    read = normalize_record(record("ok", response([message("Paris.")], status="completed")), source="a", line=1)
    assert read.status == ResponseStatus("completed")
    cut = replace(read, status=ResponseStatus("incomplete:max_output_tokens", warning="cut short here"))
    row, scoring = record_row(convert_record(cut, OFFLINE), {}, OFFLINE)
    assert row.response_status == "incomplete:max_output_tokens" and "cut short here" in row.warnings
    assert scoring is not None and scoring.status == "incomplete:max_output_tokens"
    gone = replace(read, status=ResponseStatus("failed", error="a:1: response failed: told so"))
    row, scoring = record_row(convert_record(gone, OFFLINE), {}, OFFLINE)
    assert (row.response_status, row.error, scoring) == ("failed", "a:1: response failed: told so", None)
    unknown = replace(read, status=None)
    row, scoring = record_row(convert_record(unknown, OFFLINE), {}, OFFLINE)
    assert row.response_status is None and row.error is None and scoring is not None


def test_records_without_a_status_are_unknown() -> None:
    assert record_status([1, 2]) is None
    assert record_status({"request": {}, "response": {"id": "resp_1"}}) is None


def test_recorded_api_errors_are_failed_rows(recorded_responses: Path) -> None:
    paths = sorted(recorded_responses.glob("*error*.json"))
    assert len(paths) >= 2
    df = tlmscore.prepare([str(p) for p in paths], OFFLINE, pages=MemoryPages({}))
    assert list(df.response_status) == ["failed"] * len(paths)
    for path, error in zip(paths, df.error, strict=True):
        api = json.loads(path.read_text())["error"]
        assert api["message"] in error and str(api["code"] or api["type"]) in error and str(path) in error


def test_every_recorded_response_gets_its_status(recorded_responses: Path) -> None:
    paths = sorted(recorded_responses.glob("*.json"))
    df = tlmscore.prepare([str(p) for p in paths], OFFLINE, pages=MemoryPages({}))
    assert len(df) == len(paths)
    for path, status in zip(paths, df.response_status, strict=True):
        body = json.loads(path.read_text(encoding="utf-8"))
        if body.get("status") == "incomplete":
            assert status == f"incomplete:{body['incomplete_details']['reason']}", path.name
        else:
            assert status in {"completed", "failed", "incomplete:no_answer"}, path.name
    assert "incomplete:max_output_tokens" in set(df.response_status)
    assert (df.response_status == "failed").sum() == df.error.notna().sum()


def record(rid: str, body: dict[str, Any], request: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": rid, "request": request or {"model": "gpt-5-mini", "input": "Question?"}, "response": body}


RECORDS = [
    record("zh-cut", response([message("长城全长约两万一千公里，始建于")], status="incomplete",
                              incomplete_details={"reason": "max_output_tokens"}),
           {"model": "gpt-5-mini", "input": "长城有多长？"}),
    record("ja-filtered", response([message("東京タワーの高さは333メートルで、")], status="incomplete",
                                   incomplete_details={"reason": "content_filter"})),
    record("ar-ok", response([message("تقع القاهرة على ضفاف نهر النيل.")], status="completed")),
    record("failed", response([], status="failed", error={"code": "server_error", "message": "服务器错误，请重试。"})),
    record("queued", response([], status="queued", background=True)),
    record("empty", response([], status="completed")),
    {"id": "chat-length", "request": {"model": "deepseek-chat", "messages": [{"role": "user", "content": "Hi"}]},
     "response": completion("مرحبا، كيف يمكنني", "length")},
]


def test_rows_carry_the_status_errors_and_warnings() -> None:
    df = tlmscore.prepare(RECORDS, OFFLINE, pages=MemoryPages({})).set_index("id")
    assert dict(df.response_status) == {
        "zh-cut": "incomplete:max_output_tokens", "ja-filtered": "incomplete:content_filter", "ar-ok": "completed",
        "failed": "failed", "queued": "queued", "empty": "incomplete:empty_output",
        "chat-length": "incomplete:max_output_tokens"}
    assert df.loc["zh-cut", "response"] == "长城全长约两万一千公里，始建于"
    assert any("max_output_tokens" in w for w in df.loc["zh-cut", "warnings"])
    assert any("content_filter" in w for w in df.loc["ja-filtered", "warnings"])
    assert df.loc["ar-ok", "warnings"] == [] and df.loc["ar-ok", "error"] is None
    assert df.loc["failed", "error"] == "<records>:4: response failed: server_error: 服务器错误，请重试。"
    assert df.loc["failed", "prompt"] is None and df.loc["queued", "prompt"] is None
    assert "queued" in df.loc["queued", "error"]
    assert df.loc["chat-length", "response"] == "مرحبا، كيف يمكنني"


class Recorder:
    """A scorer that records what it was given and scores nothing."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[ScoringInput] = []

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        self.seen.extend(inputs)
        return [Score.unscorable(f"status {x.status}") for x in inputs]


def test_scorers_are_told_the_status() -> None:
    recorder = Recorder()
    df = tlmscore.score(RECORDS, recorder, OFFLINE, pages=MemoryPages({}))
    told = {x.response: x.status for x in recorder.seen}
    assert told["长城全长约两万一千公里，始建于"] == "incomplete:max_output_tokens"
    assert told["تقع القاهرة على ضفاف نهر النيل."] == "completed"
    assert len(recorder.seen) == 5  # error rows (failed, queued) are not scored
    assert math.isnan(df.set_index("id").loc["failed", "score"])


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_writers_keep_the_column(tmp_path: Path, suffix: str) -> None:
    import pandas as pd

    df = tlmscore.prepare(RECORDS, OFFLINE, pages=MemoryPages({}))
    out = tmp_path / f"rows{suffix}"
    with RowWriter(out) as writer:
        writer.write(df.to_dict("records"))
    read = {".jsonl": lambda p: pd.read_json(p, lines=True), ".csv": pd.read_csv, ".parquet": pd.read_parquet}
    back = read[suffix](out)
    assert list(back.response_status) == list(df.response_status)


def test_fidelity_fixture_statuses() -> None:
    from tests.support.paths import FIXTURES

    df = tlmscore.prepare(FIXTURES / "fidelity.jsonl", OFFLINE, pages=MemoryPages({})).set_index("id")
    assert dict(df.response_status) == {
        "failed-rate-limit": "failed", "background-queued": "queued", "background-cancelled": "cancelled",
        "incomplete-max-tokens-zh": "incomplete:max_output_tokens",
        "incomplete-content-filter-ja": "incomplete:content_filter",
        "reasoning-used-every-token": "incomplete:max_output_tokens",
        "completed-empty-output": "incomplete:empty_output",
        "tool-call-unicode-ar": "completed", "stored-prompt-template": "completed", "deepseek-think": "completed",
        "chat-length-ar": "incomplete:max_output_tokens"}
    assert df.error.notna().sum() == 3
    assert "rate_limit_exceeded: Rate limit reached" in df.loc["failed-rate-limit", "error"]


def test_a_record_convert_rejects_still_reports_its_status() -> None:
    body = response([], status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    df = tlmscore.prepare([record("bad-input", body, {"model": "gpt-5", "input": 5})], OFFLINE, pages=MemoryPages({}))
    assert df.response_status[0] == "incomplete:max_output_tokens"
    assert "request.input must be a string or a list" in df.error[0]


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=12)
FIELDS = st.sampled_from(["status", "error", "incomplete_details", "output", "usage", "max_output_tokens",
                          "choices", "custom_id", "response", "body", "status_code", "message", "finish_reason"])
SHAPES = st.recursive(st.dictionaries(FIELDS, JSON, max_size=4),
                      lambda inner: st.dictionaries(FIELDS, inner | JSON, max_size=4), max_leaves=8)
VALUES = re.compile(r"completed|failed|queued|in_progress|cancelled|incomplete:.+")


@settings(max_examples=300, deadline=None)
@given(body=SHAPES, fmt=st.sampled_from(["responses", "chat"]))
def test_status_of_any_shape_is_a_value_never_an_exception(body: dict[str, Any], fmt: str) -> None:
    status = response_status(body, body, fmt)
    assert VALUES.fullmatch(status.value)
    found = record_status(body)
    assert found is None or VALUES.fullmatch(found.value)
