"""Input lines that used to end a run: each becomes one error row naming file and line, and the batch goes on."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.support.paths import FIXTURES
from tlmscore import read_transcripts
from tlmscore.cli import main
from tlmscore.errors import TranscriptError
from tlmscore.output import RowWriter

GOOD = (FIXTURES / "demo.jsonl").read_bytes().splitlines()[0]
DEEP = b"[" * 10_000 + b"]" * 10_000


def run(tmp_path: Path, log: Path, suffix: str = ".jsonl") -> tuple[int, list[dict[str, Any]], str]:
    """Run `prepare --offline` in-process; the exit code, the rows and stderr."""
    out = tmp_path / f"out{suffix}"
    code = main(["prepare", str(log), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(tmp_path / "c")])
    if code != 0:
        return code, [], ""
    if suffix == ".jsonl":
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    elif suffix == ".csv":
        rows = pd.read_csv(out).to_dict("records")
    else:
        rows = pd.read_parquet(out).to_dict("records")
    return code, rows, ""


def write(path: Path, *lines: bytes) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_deeply_nested_jsonl_line_is_an_error_row(tmp_path: Path, suffix: str) -> None:
    log = write(tmp_path / "deep.jsonl", DEEP, GOOD)
    code, rows, _ = run(tmp_path, log, suffix)
    assert code == 0
    assert len(rows) == 2
    assert rows[0]["error"].startswith(f"{log}:1: ")  # the file and line the error is on
    assert "nested too deeply" in rows[0]["error"]
    assert rows[1]["error"] is None or pd.isna(rows[1]["error"])


def test_deeply_nested_json_file_is_one_error_row(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_bytes(DEEP)
    [t] = read_transcripts(path)
    assert t.error is not None and "nested too deeply" in t.error and t.error.startswith(f"{path}:1:")


def test_a_record_nested_just_under_the_parser_limit_is_a_row(tmp_path: Path) -> None:
    """orjson reads 1,000 levels; converting or writing such a record must not take the run down."""
    line = GOOD.replace(b'"output": [{', b'"output": [{"deep": ' + b"[" * 1000 + b"]" * 1000 + b", ", 1)
    assert line != GOOD
    code, rows, _ = run(tmp_path, write(tmp_path / "d.jsonl", line, GOOD), ".parquet")
    assert code == 0 and len(rows) == 2


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_lone_surrogate_escape_is_written_as_a_replacement_character(tmp_path: Path, suffix: str) -> None:
    line = GOOD.replace(b'"How do I reset', b'"a\\ud800 How do I reset', 1)
    assert line != GOOD
    code, rows, _ = run(tmp_path, write(tmp_path / "s.jsonl", line), suffix)
    assert code == 0 and len(rows) == 1
    assert "a\ufffd How do I reset" in rows[0]["prompt"]


def test_failed_batch_line_whose_body_is_a_string(tmp_path: Path) -> None:
    failed = {"custom_id": "req-7", "response": {"status_code": 500, "body": "upstream timed out"}, "error": None}
    ok_status_text_body = {"custom_id": "req-8", "response": {"status_code": 200, "body": "not json"}}
    log = write(tmp_path / "b.jsonl", json.dumps(failed).encode(), json.dumps(ok_status_text_body).encode(), GOOD)
    code, rows, _ = run(tmp_path, log)
    assert code == 0 and len(rows) == 3
    assert "req-7" in rows[0]["error"] and "upstream timed out" in rows[0]["error"]
    assert rows[1]["error"].endswith("batch response body must be an object, not str")
    assert rows[2]["error"] is None


def test_a_utf8_bom_does_not_spoil_the_first_line(tmp_path: Path) -> None:
    code, rows, _ = run(tmp_path, write(tmp_path / "bom.jsonl", b"\xef\xbb\xbf" + GOOD, GOOD))
    assert code == 0 and [r["error"] for r in rows] == [None, None]
    as_json = tmp_path / "bom.json"
    as_json.write_bytes(b"\xef\xbb\xbf[" + GOOD + b"]")
    assert [t.error for t in read_transcripts(as_json)] == [None]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_numeric_response_id_is_written_as_text(tmp_path: Path, suffix: str) -> None:
    record = json.loads(GOOD)
    record["response"]["id"] = 12345
    code, rows, _ = run(tmp_path, write(tmp_path / "n.jsonl", json.dumps(record).encode(), GOOD), suffix)
    assert code == 0 and len(rows) == 2
    assert str(rows[0]["response_id"]) == "12345"


def many_lines(count: int) -> bytes:
    record = json.loads(GOOD)
    lines = []
    for i in range(count):
        record["id"] = f"r{i}"
        record["metadata"] = {"noise": f"{i * 7919:x}" * 40}  # compresses less than identical lines
        lines.append(json.dumps(record).encode() + b"\n")
    return b"".join(lines)


def test_a_truncated_gzip_keeps_the_rows_it_could_read(tmp_path: Path) -> None:
    packed = gzip.compress(many_lines(400))
    log = tmp_path / "cut.jsonl.gz"
    log.write_bytes(packed[: len(packed) * 2 // 3])
    code, rows, _ = run(tmp_path, log)
    assert code == 0
    *read, last = rows
    assert read and all(r["error"] is None for r in read)
    assert [r["line"] for r in read] == list(range(1, len(read) + 1))
    assert last["line"] == len(read) + 1
    assert f"reading stopped after line {len(read)}" in last["error"] and "EOFError" in last["error"]


def test_trailing_garbage_after_a_gzip_stream_is_one_error_row(tmp_path: Path) -> None:
    log = tmp_path / "tail.jsonl.gz"
    log.write_bytes(gzip.compress(many_lines(30)) + b"this is not gzip")
    code, rows, _ = run(tmp_path, log)
    assert code == 0 and len(rows) == 31
    assert all(r["error"] is None for r in rows[:30])
    assert "reading stopped after line 30" in rows[30]["error"] and "BadGzipFile" in rows[30]["error"]


@pytest.mark.parametrize("content", [GOOD + b"\n", b"\x1f\x8b\x08\x00" + b"nonsense" * 20, b""],
                         ids=["plain text", "corrupt header", "empty"])
def test_an_unreadable_gzip_input_is_exit_2_with_a_message(tmp_path: Path, content: bytes,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "bad.jsonl.gz"
    log.write_bytes(content)
    out = tmp_path / "o.jsonl"
    code = main(["prepare", str(log), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    if not content:  # an empty file is not gzip either, but a zero-byte gzip is read as no records
        assert code == 0 and out.read_text(encoding="utf-8") == ""
        return
    assert code == 2
    assert f"{log}: unreadable" in err and "Traceback" not in err
    with pytest.raises(TranscriptError, match="unreadable"):
        list(read_transcripts(log))


def test_a_corrupt_gzip_json_file_is_unreadable(tmp_path: Path) -> None:
    log = tmp_path / "bad.json.gz"
    log.write_bytes(gzip.compress(b"[" + GOOD + b"]")[:40])
    with pytest.raises(TranscriptError, match="unreadable"):
        list(read_transcripts(log))


def test_closing_a_row_writer_twice_keeps_the_output(tmp_path: Path) -> None:
    for suffix in (".jsonl", ".csv", ".parquet"):
        path = tmp_path / f"o{suffix}"
        writer = RowWriter(path)
        writer.write([{"id": "a", "source": "s", "line": 1}])
        writer.close()
        size = path.stat().st_size
        writer.close()
        with writer:
            pass
        assert path.stat().st_size == size > 0
        with pytest.raises(ValueError, match="closed"):
            writer.write([{"id": "b", "source": "s", "line": 2}])


def test_a_lone_surrogate_in_a_cited_url_does_not_reach_the_cache(tmp_path: Path) -> None:
    """Found by the fuzz suite: a URL with a lone surrogate could not be hashed into a cache key."""
    record = {"request": {"messages": [{"role": "user", "content": "How many people live in SF?"}]},
              "response": {"object": "chat.completion", "citations": ["https://example.org/\\ud800", "x"],
                           "choices": [{"message": {"role": "assistant", "content": "About 830,000.[1]"}}]}}
    line = json.dumps(record).encode().replace(b"\\\\ud800", b"\\ud800")
    assert b"\\ud800" in line and b"\\\\ud800" not in line
    code, rows, _ = run(tmp_path, write(tmp_path / "u.jsonl", line, GOOD))
    assert code == 0 and [r["error"] for r in rows] == [None, None]


def test_an_unreadable_second_input_stops_the_run_before_it_starts(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path / "good.jsonl", GOOD)
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(GOOD)
    out = tmp_path / "o.jsonl"
    code = main(["prepare", str(good), str(bad), "-o", str(out), "--offline", "--quiet",
                 "--cache-dir", str(tmp_path / "c")])
    assert code == 2
    assert f"{bad}: unreadable: BadGzipFile" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl.gz", "good.jsonl"]


def test_a_record_object_that_cannot_be_dumped_is_an_error_row() -> None:
    class Broken:
        def model_dump(self, **_: Any) -> dict[str, Any]:
            raise ValueError("cannot serialize")

    good = json.loads(GOOD)
    got = list(read_transcripts([Broken(), good]))
    assert got[0].error == "<records>:1: record could not be read: ValueError: cannot serialize"
    assert got[1].error is None
