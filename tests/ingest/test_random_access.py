"""`.gz` inputs: random access decompresses once, batch inputs are joined and pickled, chains cross the file."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import tlmscore
from tests.support.paths import FIXTURES
from tlmscore import MemoryPages, Settings
from tlmscore.ingest import BatchInputs
from tlmscore.ingest._logfile import RandomAccess, lines


def test_random_access_into_gz_decompresses_once(tmp_path: Path) -> None:
    packed = tmp_path / "log.jsonl.gz"
    data = b"".join(json.dumps({"n": i, "pad": "x" * (i % 50)}).encode() + b"\n" for i in range(2000))
    packed.write_bytes(gzip.compress(data))
    offsets = {number: offset for number, offset, _ in lines(packed)}
    with RandomAccess() as files:
        assert json.loads(files.line(packed, offsets[1500]))["n"] == 1499
        packed.unlink()  # later lookups must not go back to the compressed file
        for number in (2000, 3, 999, 1):
            assert json.loads(files.line(packed, offsets[number]))["n"] == number - 1


def test_batch_inputs_in_gz_are_joined_without_rereading(tmp_path: Path) -> None:
    inputs = tmp_path / "in.jsonl.gz"
    inputs.write_bytes(gzip.compress(b"".join(
        json.dumps({"custom_id": f"c{i}", "method": "POST", "url": "/v1/responses",
                    "body": {"model": "m", "input": f"question {i}"}}).encode() + b"\n" for i in range(500))))
    batch = BatchInputs([inputs])
    try:
        assert batch.request("c250") == {"model": "m", "input": "question 250"}
        inputs.unlink()
        assert [batch.request(f"c{i}")["input"] for i in (499, 0, 7)] == [  # type: ignore[index]
            "question 499", "question 0", "question 7"]
    finally:
        batch.close()


def test_batch_inputs_pickle_as_their_index_and_read_the_files_again(tmp_path: Path) -> None:
    """Sent to another process (the Ray engine's tasks), the index goes along and the files are reopened."""
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"custom_id": f"c{i}", "body": {"input": f"q{i}"}}) + "\n"
                              for i in range(3)), encoding="utf-8")
    batch = BatchInputs([inputs])
    assert batch.request("c1") == {"input": "q1"}  # its file is open now
    copy = pickle.loads(pickle.dumps(batch))  # noqa: S301 -- our own bytes
    batch.close()
    inputs.write_text(inputs.read_text(encoding="utf-8").replace("q2", "Q2"), encoding="utf-8")
    assert len(copy) == 3 and copy.request("c2") == {"input": "Q2"}  # read again, from the same path
    copy.close()


def test_chains_across_a_gz_file(tmp_path: Path) -> None:
    """Chains look records up in a gzipped file through the same reader as the batch."""
    plain = [FIXTURES / "chain_a.jsonl", FIXTURES / "chain_b.jsonl"]
    expected = tlmscore.prepare([str(p) for p in plain], Settings(offline=True, cache_dir=tmp_path),
                                pages=MemoryPages())
    packed = []
    for path in plain:
        target = tmp_path / (path.name + ".gz")
        target.write_bytes(gzip.compress(path.read_bytes()))
        packed.append(str(target))
    got = tlmscore.prepare(packed, Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    assert list(got.prompt) == list(expected.prompt)
    assert list(got.history_complete) == list(expected.history_complete)
