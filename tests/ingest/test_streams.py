"""Event streams: logged Responses events and Chat Completions chunks become one record per response.

The events are written in the shapes of the `openai` SDK's stream event types (each is validated
against them below) and of Perplexity's documented chunk fields (`citations`, `search_results`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

import tlmscore
from tlmscore import read_transcripts
from tlmscore.ingest import scan
from tlmscore.ingest._chunks import CUT_OFF
from tlmscore.ingest._logfile import RandomAccess
from tlmscore.ingest._records import load_at
from tlmscore.ingest._streams import assemble, sse_events

EVENT = TypeAdapter(ResponseStreamEvent)


def _response(rid: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": rid, "object": "response", "created_at": 1767225600, "status": status, "model": "gpt-5-2025-08-07",
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
            "incomplete_details": None, "instructions": None}


def _message(mid: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {"id": mid, "type": "message", "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


def responses_stream(rid: str, text: str, *, end: str | None = "response.completed") -> list[dict[str, Any]]:
    """The events of one streamed response with one message, `text` in two deltas; `end=None` cuts it off."""
    mid = "msg_" + rid
    half = len(text) // 2
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response(rid, "in_progress", [])},
        {"type": "response.in_progress", "response": _response(rid, "in_progress", [])},
        {"type": "response.output_item.added", "output_index": 0, "item": {**_message(mid, "", "in_progress"),
                                                                          "content": []}},
        {"type": "response.content_part.added", "item_id": mid, "output_index": 0, "content_index": 0,
         "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}},
        {"type": "response.output_text.delta", "item_id": mid, "output_index": 0, "content_index": 0,
         "delta": text[:half], "logprobs": []},
        {"type": "response.output_text.delta", "item_id": mid, "output_index": 0, "content_index": 0,
         "delta": text[half:], "logprobs": []},
    ]
    if end is not None:
        events += [
            {"type": "response.output_text.done", "item_id": mid, "output_index": 0, "content_index": 0,
             "text": text, "logprobs": []},
            {"type": "response.output_item.done", "output_index": 0, "item": _message(mid, text)},
            {"type": end, "response": _response(rid, end.split(".")[-1], [_message(mid, text)])},
        ]
    numbered = [{**e, "sequence_number": i} for i, e in enumerate(events)]
    for event in numbered:
        EVENT.validate_python(event)  # every event is one the SDK documents
    return numbered


def sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def rows(*paths: Path) -> list[dict[str, Any]]:
    frame = tlmscore.prepare([str(p) for p in paths], tlmscore.Settings(offline=True))
    return [{str(k): v for k, v in r.items()} for r in frame.to_dict("records")]


def test_sse_file_gives_one_record_per_streamed_response(tmp_path: Path) -> None:
    path = tmp_path / "stream.sse"
    path.write_text(sse(responses_stream("resp_a", "Paris is the capital of France.")) + "data: [DONE]\n\n"
                    + sse(responses_stream("resp_b", "Berlin is the capital of Germany.")), encoding="utf-8")
    out = rows(path)
    assert [r["response"] for r in out] == ["Paris is the capital of France.", "Berlin is the capital of Germany."]
    assert [r["response_status"] for r in out] == ["completed", "completed"]
    assert [r["line"] for r in out] == [1, 30]  # 9 events of 3 lines, then [DONE]
    assert all(r["error"] is None for r in out)
    assert [t.response["id"] for t in read_transcripts(path)] == ["resp_a", "resp_b"]


def test_json_lines_of_events_gzipped_are_read_as_a_stream(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl.gz"
    events = responses_stream("resp_a", "Forty-two.") + responses_stream("resp_b", "Seven.")
    path.write_bytes(gzip.compress("".join(json.dumps(e) + "\n" for e in events).encode()))
    out = rows(path)
    assert [(r["line"], r["response"]) for r in out] == [(1, "Forty-two."), (10, "Seven.")]


def test_cut_off_stream_is_rebuilt_from_items_and_deltas_and_marked_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "cut.txt"
    events = responses_stream("resp_a", "Done answer.") + responses_stream("resp_b", "The answer was cut", end=None)
    path.write_text(sse(events), encoding="utf-8")
    out = rows(path)
    assert out[1]["response"] == "The answer was cut"
    assert out[1]["response_status"] == f"incomplete:{CUT_OFF}"
    assert any("event stream ends before the response did" in w for w in out[1]["warnings"])
    transcript = list(read_transcripts(path))[1]
    assert transcript.response["output"][0]["status"] == "incomplete"
    assert transcript.metadata["stream"] == {"first_line": 28, "last_line": 43, "events": 6, "ended_by": None}


def test_output_item_done_is_used_when_the_terminal_event_is_missing() -> None:
    events = responses_stream("resp_a", "Whole answer.")[:-1]  # up to response.output_item.done
    [(line, record)] = list(assemble(enumerate(events, start=1)))
    assert line == 1 and isinstance(record, dict)
    assert record["response"]["output"] == [_message("msg_resp_a", "Whole answer.")]
    assert record["response"]["incomplete_details"] == {"reason": CUT_OFF}


def test_incomplete_and_failed_terminal_events_and_error_events(tmp_path: Path) -> None:
    incomplete = responses_stream("resp_a", "Half an ans", end="response.incomplete")
    incomplete[-1]["response"]["incomplete_details"] = {"reason": "max_output_tokens"}
    error = {"type": "error", "code": "server_error", "message": "The server had an error.", "param": None,
             "sequence_number": 9}
    failed = [*responses_stream("resp_b", "x", end=None), error]
    EVENT.validate_python(failed[-1])
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in incomplete + failed), encoding="utf-8")
    out = rows(path)
    assert out[0]["response_status"] == "incomplete:max_output_tokens"
    assert out[0]["response"] == "Half an ans"
    assert out[1]["response_status"] == "failed"
    assert out[1]["error"] == f"{path}:10: response failed: server_error: The server had an error."


def test_bad_event_line_is_its_own_error_row_and_the_stream_still_assembles(tmp_path: Path) -> None:
    events = responses_stream("resp_a", "Fine.")
    text = sse(events[:3]) + "data: {not json\n\n" + sse(events[3:])
    path = tmp_path / "bad.sse"
    path.write_text(text, encoding="utf-8")
    out = rows(path)
    assert [r["response"] for r in out] == ["Fine.", None]
    assert out[1]["error"].startswith(f"{path}:10: invalid JSON in an event's data")


def test_stream_records_are_read_again_from_memory(tmp_path: Path) -> None:
    path = tmp_path / "stream.sse"
    path.write_text(sse(responses_stream("resp_a", "One.") + responses_stream("resp_b", "Two.")), encoding="utf-8")
    located = list(scan(str(path)))
    with RandomAccess() as files:
        again = [load_at(location, files) for location, _ in located]
    assert [t.response["id"] for t in again] == ["resp_a", "resp_b"]
    assert [t.line for t in again] == [t.line for _, t in located]


def chunk(cid: str, delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    value = {"id": cid, "object": "chat.completion.chunk", "created": 1767225600, "model": "sonar-pro",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **top}
    ChatCompletionChunk.model_validate(value)
    return value


def test_chat_chunks_with_perplexity_citations_become_a_search_answer(tmp_path: Path) -> None:
    cites = ["https://example.org/tides", "https://example.org/moon"]
    results = [{"title": "Tides", "url": cites[0], "date": "2025-03-01"},
               {"title": "Moon", "url": cites[1], "date": None}]
    chunks = [chunk("c1", {"role": "assistant", "content": ""}),
              chunk("c1", {"content": "Tides follow the moon [2]."}, citations=cites),
              chunk("c1", {}, "stop", citations=cites, search_results=results,
                    usage={"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12})]
    path = tmp_path / "chunks.sse"
    path.write_text("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n", encoding="utf-8")
    [transcript] = list(read_transcripts(path))
    assert transcript.fmt == "chat"
    assert transcript.response["citations"] == cites and transcript.response["search_results"] == results
    assert transcript.response["choices"][0]["message"]["content"] == "Tides follow the moon [2]."
    [row] = rows(path)
    assert row["response_status"] == "completed"
    assert '"name": "web_search_call"' in row["prompt"] and "https://example.org/moon" in row["prompt"]


def test_chat_chunks_join_tool_calls_and_reasoning_and_interleave_by_id() -> None:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    chunks = [
        chunk("a", {"role": "assistant", "reasoning_content": "Need the "}),
        chunk("b", {"role": "assistant", "content": "Hi"}),
        chunk("a", {"reasoning_content": "weather.", "tool_calls": [call]}),
        chunk("a", {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        chunk("b", {"content": " there"}, "stop"),
        chunk("a", {"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}, "tool_calls"),
    ]
    out = list(assemble(enumerate(chunks, start=1)))
    assert [line for line, _ in out] == [1, 2]
    first, second = (record for _, record in out)
    assert isinstance(first, dict) and isinstance(second, dict)
    message = first["response"]["choices"][0]["message"]
    assert message["reasoning_content"] == "Need the weather."
    assert message["tool_calls"] == [{"id": "call_1", "type": "function",
                                      "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]
    assert second["response"]["choices"][0]["message"]["content"] == "Hi there"


def test_chat_stream_without_finish_reason_is_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text(json.dumps(chunk("c", {"role": "assistant", "content": "Partial"})) + "\n", encoding="utf-8")
    [row] = rows(path)
    assert row["response"] == "Partial"
    assert row["response_status"] == f"incomplete:{CUT_OFF}"


def test_sse_framing_joins_data_lines_and_skips_comments() -> None:
    lines = [b": keep-alive\n", b"event: response.created\n", b'data: {"a":\n', b"data: 1}\n", b"\n",
             b"data: [DONE]\n", b"\n"]
    assert list(sse_events(enumerate(lines, start=1))) == [(2, {"a": 1, "type": "response.created"}), (6, None)]


@pytest.mark.parametrize("name", ["records.jsonl", "records.txt"])
def test_files_of_records_are_not_taken_for_streams(tmp_path: Path, name: str) -> None:
    record = {"request": {"input": "Hi"}, "response": _response("resp_a", "completed", [_message("m", "Hello.")])}
    path = tmp_path / name
    path.write_text(json.dumps(record) + ("\n" if name.endswith("jsonl") else ""), encoding="utf-8")
    [row] = rows(path)
    assert row["response"] == "Hello." and row["prompt"] == "Hi"


@pytest.mark.parametrize("nested", [False, True])
def test_an_error_event_before_response_failed_is_one_row_of_one_failed_response(tmp_path: Path, nested: bool) -> None:
    """The API sends `error`, then `response.failed` for the same response: one streamed response, one row."""
    said = {"code": "server_error", "message": "The model is overloaded."}
    error: dict[str, Any] = {"type": "error", "sequence_number": 6,
                             **({"error": {"type": "server_error", **said}} if nested else {**said, "param": None})}
    failed = _response("resp_f", "failed", [])
    events = [*responses_stream("resp_f", "Partly", end=None), error,
              {"type": "response.failed", "sequence_number": 7, "response": failed}]
    EVENT.validate_python(events[-1])
    path = tmp_path / "failed.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    [row] = rows(path)
    assert row["response_status"] == "failed"
    assert row["error"] == f"{path}:1: response failed: server_error: The model is overloaded."
    [transcript] = list(read_transcripts(path))
    assert transcript.metadata["stream"]["ended_by"] == "response.failed"


def test_an_error_event_that_ends_the_stream_still_fails_its_response() -> None:
    error = {"type": "error", "sequence_number": 6, "code": "server_error", "message": "Lost.", "param": None}
    [(line, record)] = list(assemble(enumerate([*responses_stream("resp_e", "Par", end=None), error], start=1)))
    assert line == 1 and isinstance(record, dict)
    assert record["response"]["status"] == "failed"
    assert record["response"]["error"] == {"code": "server_error", "message": "Lost."}


def test_perplexity_stream_ending_with_chat_completion_done_is_one_completed_answer(tmp_path: Path) -> None:
    """Perplexity closes a stream with a `chat.completion.done` object holding the whole message and its sources."""
    cites = ["https://example.org/tides"]
    chunks = [chunk("p1", {"role": "assistant", "content": "Tides follow "}),
              chunk("p1", {"content": "the moon [1]."}, "stop", citations=cites)]
    done = {"id": "p1", "object": "chat.completion.done", "created": 1767225600, "model": "sonar",
            "citations": cites, "search_results": [{"title": "Tides", "url": cites[0]}],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Tides follow the moon [1]."}}]}
    path = tmp_path / "sonar.sse"
    path.write_text("".join(f"data: {json.dumps(c)}\n\n" for c in [*chunks, done]) + "data: [DONE]\n\n",
                    encoding="utf-8")
    [row] = rows(path)
    assert row["error"] is None and row["response_status"] == "completed"
    assert row["response"].startswith("Tides follow the moon [1].")
    [transcript] = list(read_transcripts(path))
    assert transcript.response["search_results"] == done["search_results"]
    assert transcript.metadata["stream"]["ended_by"] == "chat.completion.done"


def test_a_done_object_fills_in_what_the_deltas_did_not_carry() -> None:
    done = {"id": "p2", "object": "chat.completion.done", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Whole answer."}}]}
    [(_, record)] = list(assemble(enumerate([chunk("p2", {"role": "assistant"}), done], start=1)))
    assert isinstance(record, dict)
    assert record["response"]["choices"][0]["message"]["content"] == "Whole answer."
    assert record["response"]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("name", ["events.txt", "events.json", "events"])
def test_a_stream_is_read_by_its_content_whatever_its_name(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("".join(json.dumps(e) + "\n" for e in responses_stream("resp_n", "Named any way.")),
                    encoding="utf-8")
    [row] = rows(path)
    assert row["response"] == "Named any way." and row["error"] is None


@pytest.mark.parametrize("name", ["records.txt", "records.json", "records.log"])
def test_json_lines_are_read_as_json_lines_whatever_the_files_name(tmp_path: Path, name: str) -> None:
    records = [{"id": f"r{i}", "request": {"input": f"Q{i}?"},
                "response": _response(f"resp_{i}", "completed", [_message(f"m{i}", f"A{i}.")])} for i in range(3)]
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = rows(path)
    assert [r["id"] for r in out] == ["r0", "r1", "r2"] and [r["response"] for r in out] == ["A0.", "A1.", "A2."]
    assert all(r["error"] is None for r in out)
