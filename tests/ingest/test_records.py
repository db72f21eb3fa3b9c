"""Ingest: every record shape, lenient to schema drift, one transcript per record with errors named."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import Response
from pydantic import ValidationError

from tlmscore import read_transcripts
from tlmscore.errors import TranscriptError
from tlmscore.ingest import _logfile as logfile

MESSAGE = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": "Paris.", "annotations": []}]}
RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4.1", "output": [MESSAGE],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_wrapper_bare_and_bad_records_each_give_one_transcript(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "log.jsonl", [
        json.dumps({"id": "a", "request": {"input": "Capital of France?"}, "response": RESPONSE,
                    "metadata": {"team": "x", "extra": [1]}}),
        json.dumps(RESPONSE),
        '{"id": "broken", "request": ',
        "",
        "[1, 2]",
        json.dumps({"request": {"input": "x"}, "response": {"id": "resp_2", "object": "response"}}),
        json.dumps({"request": {"input": "x"}, "response": {"output": [MESSAGE, "oops"]}}),
        json.dumps({"request": "not an object", "response": RESPONSE}),
    ])
    got = list(read_transcripts(path))
    assert [t.line for t in got] == [1, 2, 3, 5, 6, 7, 8]
    assert got[0].id == "a" and got[0].metadata == {"team": "x", "extra": [1]} and got[0].error is None
    assert got[1].id == "log.jsonl:2" and got[1].response["id"] == "resp_1"  # named relative to the inputs
    assert got[2].error == f"{path}:3: invalid JSON: Expecting value at column 29"
    assert got[3].error == f"{path}:5: record must be a JSON object, not list"
    assert got[4].error == f"{path}:6: response has no 'output'"
    assert got[5].error == f"{path}:7: response.output[1] is not an object"
    assert got[6].error == f"{path}:8: 'request' must be an object, not str"


def test_lines_only_the_standard_library_reads_are_read_as_it_reads_them(tmp_path: Path) -> None:
    """NaN and a 71-bit integer are read as `json` reads them (the last is not a float); a lone surrogate,
    which no output format (nor a cache key) can encode, is read as U+FFFD."""
    response = ', "response": ' + json.dumps(RESPONSE) + "}"
    lines = [
        json.dumps({"id": "a", "request": {"input": "Zürich \u2028 東京"}, "response": RESPONSE}, ensure_ascii=False),
        '{"id": "b", "request": {"input": "q", "temperature": NaN}' + response,
        '{"id": "c", "request": {"input": "bad \\udc80 half"}' + response,
        '{"id": "d", "request": {"input": "q", "seed": ' + str(2**70 + 1) + "}" + response,
    ]
    got = list(read_transcripts(write_lines(tmp_path / "odd.jsonl", lines)))
    assert [t.error for t in got] == [None] * 4
    assert [t.raw for t in (got[0], got[3])] == [json.loads(line) for line in (lines[0], lines[3])]
    assert got[1].request["temperature"] != got[1].request["temperature"]  # NaN
    assert got[2].request["input"] == "bad \ufffd half"
    assert got[3].request["seed"] == 2**70 + 1 and isinstance(got[3].request["seed"], int)


def test_unknown_fields_are_kept_in_raw(tmp_path: Path) -> None:
    record = {"id": "a", "request": {"input": "q", "future_field": {"x": 1}},
              "response": {**RESPONSE, "new_top_level": True}, "extra": "kept"}
    (t,) = read_transcripts(write_lines(tmp_path / "a.jsonl", [json.dumps(record)]))
    assert t.raw == record
    assert t.request["future_field"] == {"x": 1}
    assert t.response["new_top_level"] is True


def test_schema_drift_that_the_sdk_rejects_still_loads(tmp_path: Path) -> None:
    drifted = {**RESPONSE, "usage": {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 0},
                                     "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0},
                                     "total_tokens": 7}}
    with pytest.raises(ValidationError, match="cache_write_tokens"):
        Response.model_validate(drifted)
    (t,) = read_transcripts(write_lines(tmp_path / "old.jsonl", [json.dumps(drifted)]))
    assert t.error is None


def test_json_file_array_and_single_object(tmp_path: Path) -> None:
    array = tmp_path / "many.json"
    array.write_text(json.dumps([RESPONSE, {"nope": 1}, RESPONSE]), encoding="utf-8")
    got = list(read_transcripts(array))
    assert [t.error is None for t in got] == [True, False, True]
    assert got[1].error == f"{array}:2: response has no 'output'"
    single = tmp_path / "one.json"
    single.write_text(json.dumps(RESPONSE), encoding="utf-8")
    assert len(list(read_transcripts(single))) == 1
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": [1,\n2,,]}', encoding="utf-8")
    (bad,) = read_transcripts(broken)
    assert bad.error is not None and bad.error.startswith(f"{broken}:2: invalid JSON")


def test_gzip_and_invalid_utf8_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(json.dumps(RESPONSE).encode() + b"\n" + b'{"id": "\xff\xfe"}\n')
    got = list(read_transcripts(path))
    assert got[0].error is None
    assert got[1].error is not None and "not UTF-8" in got[1].error and ":2:" in got[1].error


def test_sdk_objects_and_in_memory_records() -> None:
    sdk = Response.model_validate(RESPONSE)
    (t,) = read_transcripts(sdk)
    assert t.error is None and t.response["output"][0]["content"][0]["text"] == "Paris."
    got = list(read_transcripts([{"request": {"input": "q"}, "response": sdk}, 42]))
    assert got[0].error is None and got[0].id == "<records>:1"
    assert got[1].error == "<records>:2: record must be a JSON object, not int"


def test_api_error_and_failed_batch_lines_become_error_rows() -> None:
    error = {"error": {"message": "Unsupported parameter: 'temperature'", "type": "invalid_request_error"}}
    batch_ok = {"custom_id": "r1", "response": {"status_code": 200, "body": RESPONSE}, "error": None}
    batch_bad = {"custom_id": "r2", "response": {"status_code": 429, "body": {"error": {"message": "slow"}}}}
    got = list(read_transcripts([error, batch_ok, batch_bad]))
    assert got[0].error is not None and "API error" in got[0].error and "temperature" in got[0].error
    assert got[1].error is None and got[1].metadata == {"custom_id": "r1"}
    assert got[2].error is not None and "'r2' failed" in got[2].error


def test_chat_completion_records_are_recognised() -> None:
    chat = {"id": "c1", "object": "chat.completion", "model": "sonar",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}}]}
    (t,) = read_transcripts({"request": {"messages": [{"role": "user", "content": "Hello"}]}, "response": chat})
    assert t.fmt == "chat" and t.error is None


def test_missing_file_is_an_error() -> None:
    with pytest.raises(TranscriptError, match="no such file"):
        list(read_transcripts("/nonexistent/log.jsonl"))


def test_reading_is_lazy(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "big.jsonl", [json.dumps(RESPONSE)] * 3)
    iterator = read_transcripts(path)
    first = next(iterator)
    assert first.line == 1
    path.write_text("", encoding="utf-8")  # later lines were never read
    assert first.error is None


DIGIT_RUNS = st.text(alphabet="0123456789", max_size=25).map(str.encode)
OTHER_BYTES = st.sampled_from([b"a", b'"', b" ", b"-", b".", b"e", b"\xc3\xa9", b"\xd9\xa3"])


@given(st.lists(st.one_of(DIGIT_RUNS, OTHER_BYTES), max_size=12))
def test_the_long_number_check_finds_exactly_the_runs_of_twenty_digits(parts: list[bytes]) -> None:
    raw = b"".join(parts)
    assert logfile._has_long_number(raw) == bool(re.search(rb"[0-9]{20}", raw))
