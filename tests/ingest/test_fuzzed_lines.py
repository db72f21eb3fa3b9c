"""Fuzzing ingest with mutated real records: any line in → exactly one row out, exit 0.

The seeds are the records and API replies of the project's fixtures and, when the shared corpus is
present, its recorded Responses API outputs. Each example mutates a few of them, at the byte level (cuts,
hostile tokens, stray newlines) or in their structure (a value replaced by one of another type,
a key dropped), writes them as a JSONL file and runs `prepare --offline` on it in-process with an
empty cache, to one of the three output formats.
"""

from __future__ import annotations

import codecs
import copy
import gzip
import json
import tempfile
import zlib
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.paths import CORPUS, FIXTURES
from tlmscore.cli import main
from tlmscore.ingest._streams import is_event, is_sse_line


def _is_stream_line(raw: bytes) -> bool:
    """Whether a line is an event stream's (SSE, or a JSON event line)."""
    try:
        return is_sse_line(raw) or is_event(orjson.loads(raw.removeprefix(codecs.BOM_UTF8)))
    except orjson.JSONDecodeError:
        return False


def _seed_lines() -> list[bytes]:
    lines = [line for path in sorted(FIXTURES.glob("*.jsonl"))
             for line in path.read_bytes().splitlines() if line.strip() and not _is_stream_line(line)]
    # event stream lines are left out: a stream is one record per streamed response (tests/ingest/test_streams.py)
    # the API replies of fixtures/responses, and of the shared corpus where conftest.py looks for it (optional)
    replies = [*sorted((FIXTURES / "responses").glob("*.json")), *sorted((CORPUS / "responses").glob("*.json"))]
    return lines + [json.dumps(json.loads(p.read_bytes())).encode() for p in replies]


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


SEEDS = _seed_lines()
RECORDS = [line for line in SEEDS if _parses(line)]
seed = st.integers(0, len(SEEDS) - 1).map(SEEDS.__getitem__)
record = st.integers(0, len(RECORDS) - 1).map(RECORDS.__getitem__)
HOSTILE_BYTES = [b"\\ud800", b"\\udfff\\ud800", b"\xef\xbb\xbf", b"[" * 3000, b"{" * 50, b"\x00", b"\xff\xfe",
                 b"NaN", b"-Infinity", b"1e999", b"123456789012345678901234567890", b'"', b"\\", b"\n", b"\r\n",
                 b",", b":", b"null", b"\xe2\x80\xa8", b"\xed\xa0\x80"]
HOSTILE_VALUES: list[Any] = [
    None, True, 0, -1, 2**70, 1e308, float("nan"), "", "\ud800", "x" * 5000, [], {}, [None], {"type": None},
    {"type": "message"}, {"type": "web_search_call"}, {"type": 7}, "resp_", {"id": 5}, [[[[]]]],
]


@st.composite
def byte_mutation(draw: st.DrawFn) -> bytes:
    line = draw(seed)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(line)))
        action = draw(st.sampled_from(["cut", "insert", "truncate", "repeat"]))
        if action == "cut":
            line = line[:at] + line[at + draw(st.integers(1, 40)):]
        elif action == "insert":
            line = line[:at] + draw(st.sampled_from(HOSTILE_BYTES)) + line[at:]
        elif action == "truncate":
            line = line[:at]
        else:
            line = line[:at] + line[max(0, at - 30):at] + line[at:]
    return line


def _places(value: Any, found: list[tuple[Any, Any]]) -> None:
    """Every (container, key) pair inside `value`, iteratively (seeds are not deep)."""
    stack = [value]
    while stack:
        node = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
        for key in keys:
            found.append((node, key))
            stack.append(node[key])


@st.composite
def structure_mutation(draw: st.DrawFn) -> bytes:
    value = json.loads(draw(record))
    for _ in range(draw(st.integers(1, 4))):
        places: list[tuple[Any, Any]] = []
        _places(value, places)
        if not places:
            break
        node, key = places[draw(st.integers(0, len(places) - 1))]
        if isinstance(node, dict) and draw(st.booleans()):
            del node[key]
        else:
            node[key] = copy.deepcopy(HOSTILE_VALUES[draw(st.integers(0, len(HOSTILE_VALUES) - 1))])
    return json.dumps(value, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


def run_code(rows: list[dict[str, Any]]) -> int:
    """The exit code of a run with these rows: 1 when every row is an error row, else 0."""
    return 1 if rows and all(isinstance(row["error"], str) for row in rows) else 0


def warned(row: dict[str, Any]) -> bool:
    """Whether a row read back from any output format carries a warning."""
    warnings = row["warnings"]
    return bool(list(json.loads(warnings) if isinstance(warnings, str) else warnings))


def read_rows(out: Path) -> list[dict[str, Any]]:
    """The rows as written. A CSV cell cannot tell null from "": text cells read as text (an empty
    prompt is ""), and an empty `error` cell as no error."""
    if out.suffix == ".jsonl":
        return [json.loads(line) for line in out.read_bytes().split(b"\n") if line]  # not splitlines: U+2028 is text
    if out.suffix == ".csv":
        frame = pd.read_csv(out, keep_default_na=False, na_values={"error": [""]})
        frame["error"] = frame["error"].astype(object).where(frame["error"].notna(), None)
    else:
        frame = pd.read_parquet(out)
    return frame.to_dict("records")  # type: ignore[return-value]


def assert_rendered_or_error(row: dict[str, Any], log: Path, suffix: str) -> None:
    """A row is rendered (a prompt, no error) or an error row naming the file and line (no prompt)."""
    if row["error"] is None:
        assert isinstance(row["prompt"], str), row
    else:
        assert isinstance(row["error"], str) and row["error"].startswith(f"{log}:{row['line']}:"), row
        assert row["prompt"] is None or (suffix == ".csv" and row["prompt"] == ""), row


CHAT_WITHOUT_CONTENT = json.dumps({
    "request": {"model": "sonar", "messages": [{"role": "user"}]},
    "response": {"id": "c1", "object": "chat.completion", "created": 1768990000, "model": "sonar", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hello."}}]}}).encode()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.one_of(byte_mutation(), structure_mutation(), seed), min_size=1, max_size=4),
       st.sampled_from([".jsonl", ".csv", ".parquet"]))
@example([CHAT_WITHOUT_CONTENT, b"[]"], ".csv")  # an empty prompt (written as an empty CSV cell) beside an error row
@example([codecs.BOM_UTF8, codecs.BOM_UTF8], ".jsonl")  # the file's BOM, then a line holding only a BOM
def test_any_line_in_gives_exactly_one_row_out(lines: list[bytes], suffix: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        log = root / "fuzz.jsonl"
        log.write_bytes(b"".join(line + b"\n" for line in lines))
        # every non-blank line is a row; a UTF-8 BOM opening the file marks its encoding, it is not text
        text = log.read_bytes().removeprefix(codecs.BOM_UTF8)
        expected = [n for n, raw in enumerate(text.split(b"\n")[:-1], start=1) if raw.strip()]
        out = root / f"out{suffix}"
        code = main(["prepare", str(log), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(root / "cache")])
        rows = read_rows(out)
        assert code == run_code(rows)
        assert [int(row["line"]) for row in rows] == expected
        for row in rows:
            assert_rendered_or_error(row, log, suffix)


def test_a_message_without_content_is_not_rendered_silently_as_an_empty_prompt(tmp_path: Path) -> None:
    log = tmp_path / "chat.jsonl"
    log.write_bytes(CHAT_WITHOUT_CONTENT + b"\n")
    out = tmp_path / "out.jsonl"
    assert main(["prepare", str(log), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(tmp_path)]) == 0
    (row,) = read_rows(out)
    assert row["prompt"] or row["error"] or row["warnings"], row


GZ_LINES = [line + b"\n" for line in RECORDS[:40]]


def read_rows_of(lines: list[bytes], root: Path) -> list[dict[str, Any]]:
    """The rows the same lines give from a plain, intact file."""
    log = root / "plain.jsonl"
    log.write_bytes(b"".join(lines))
    out = root / "plain-out.jsonl"
    code = main(["prepare", str(log), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(root / "c2")])
    rows = read_rows(out)
    assert code == run_code(rows)
    return [{"id": row["id"].replace("plain.jsonl", "cut.jsonl.gz")} for row in rows]
GZ_DATA = gzip.compress(b"".join(GZ_LINES), mtime=0)


def readable(data: bytes) -> bytes:
    """What a gzip reader gets out of `data` before it breaks (fed a byte at a time, so an error
    loses nothing already decoded)."""
    decoder = zlib.decompressobj(wbits=31)
    out = bytearray()
    for at in range(len(data)):
        try:
            out += decoder.decompress(data[at : at + 1])
        except zlib.error:
            break
        if decoder.eof:
            break
    return bytes(out)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, len(GZ_DATA)), st.binary(max_size=8))
def test_a_gzip_cut_anywhere_keeps_what_it_could_read(cut: int, tail: bytes) -> None:
    """A .jsonl.gz cut at any byte (and followed by any bytes): exit 2 when nothing is readable, else
    every whole line read before the break is its row and one error row says where reading stopped
    (a last line that the break cut short, or that damaged bytes decoded to, is not a row of its own)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        log = root / "cut.jsonl.gz"
        log.write_bytes(GZ_DATA[:cut] + tail)
        out = root / "out.jsonl"
        code = main(["prepare", str(log), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(root / "cache")])
        if code == 2:  # refused as a whole: right only when not one whole line could be read
            assert not out.exists()
            assert b"\n" not in readable(GZ_DATA[:cut] + tail)
            return
        rows = read_rows(out)
        assert code == run_code(rows)
        if not rows:  # nothing but gzip's zero padding: an empty log
            assert (GZ_DATA[:cut] + tail).strip(b"\0") == b""
            return
        intact = cut == len(GZ_DATA) and tail == b"\0" * len(tail)
        read = rows if intact else rows[:-1]
        assert [int(r["line"]) for r in read] == list(range(1, len(read) + 1))
        assert [r["id"] for r in read] == [r["id"] for r in read_rows_of(GZ_LINES[: len(read)], root)]
        if not intact:  # a damaged last line is no record of its own: the error row takes its place
            assert f"reading stopped after line {len(read)}" in rows[-1]["error"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.one_of(structure_mutation(), record), min_size=1, max_size=4), st.booleans())
def test_any_element_of_a_json_array_gives_exactly_one_row(elements: list[bytes], single: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        log = root / "fuzz.json"
        log.write_bytes(elements[0] if single else b"[" + b",\n".join(elements) + b"]")
        out = root / "out.parquet"
        code = main(["prepare", str(log), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(root / "cache")])
        rows = read_rows(out)
        assert code == run_code(rows)
        try:
            value = json.loads(log.read_bytes().decode("utf-8"))
            expected = len(value) if isinstance(value, list) else 1  # a lone element may itself be an array
        except ValueError:  # not UTF-8 (a lone surrogate written raw) or not JSON: the file is one error row
            expected = 1
            assert isinstance(rows[0]["error"], str)
        assert [int(row["line"]) for row in rows] == list(range(1, expected + 1))
