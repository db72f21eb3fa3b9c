"""`score --annotate`'s write-back (`WriteBack`): rows handed over chunk by chunk are sent on a thread of
their own, so a store that is slow to answer does not hold up the run that hands them over; a run killed
while writing back, then resumed, writes each row back once (its progress file)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.servers.otlp_receiver import OtlpReceiver, serve_otlp
from tests.support.paths import FIXTURES
from tlmscore.annotate import WriteBack, progress_path
from tlmscore.cli import main
from tlmscore.output import read_rows

ROWS = 600
"""More than one OTLP batch (512): the first batch is sent while rows are still being handed over."""
BATCH = 512
"""An OTLP batch."""
COPIES = 150
RECORDS = 14
"""The demo's records that have an id."""
"""The demo's records, this many times: a run that saves more chunks than wait for a held store after two batches."""


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    yield from serve_otlp()


def test_a_slow_store_does_not_hold_up_the_rows_handed_over(receiver: OtlpReceiver, tmp_path: Path) -> None:
    receiver.gate = threading.Event()  # the store answers nothing until the test lets it (at most 10 s)
    back = WriteBack([f"otlp:{receiver.url}"], tmp_path / "side.jsonl", threshold=0.5)
    rows = [{"id": f"r{i}", "source": "log.jsonl", "line": i, "scorer": "grounding", "score": i / ROWS}
            for i in range(ROWS)]
    started = time.monotonic()
    for at in range(0, ROWS, 100):  # chunk by chunk, as a run hands them over
        back.add(rows[at:at + 100])
    handed = time.monotonic() - started
    deadline = time.monotonic() + 10
    while receiver.requests == 0 and time.monotonic() < deadline:  # the first batch is on its way, held
        time.sleep(0.01)
    assert receiver.requests == 1 and receiver.records == []
    assert handed < 5  # a write-back on the caller's thread would wait the full 10 s here
    receiver.gate.set()
    finished = back.finish()
    ids = [next(a.value.string_value for a in r.attributes if a.key == "tlmscore.record.id") for r in receiver.records]
    assert ids == [r["id"] for r in rows]  # every row once, in order
    (report,) = finished.reports
    assert report.outcome is not None and (report.outcome.rows, report.outcome.written) == (ROWS, ROWS)
    assert finished.left == []


def _logs(tmp_path: Path, copies: int) -> Path:
    """The demo's records, `copies` times over, each with an id of its own (the id its annotation carries)."""
    records = [record for line in (FIXTURES / "demo.jsonl").read_text(encoding="utf-8").splitlines()
               if isinstance(record := orjson.loads(line) if _json(line) else None, dict) and "id" in record]
    logs = tmp_path / "logs.jsonl"
    logs.write_text("".join(json.dumps(r | {"id": f"{r['id']}-{n}"}) + "\n" for n in range(copies) for r in records),
                    encoding="utf-8")
    assert len(records) == RECORDS
    return logs


def _json(line: str) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _steps(progress: Path) -> list[Any]:
    """The steps of a progress file, once each is written whole."""
    lines = progress.read_text(encoding="utf-8").split("\n")[1:] if progress.exists() else []
    return [orjson.loads(line) for line in lines] if all(map(_json, lines)) else []


def _held(receiver: OtlpReceiver, proc: subprocess.Popen[str]) -> None:
    """Wait until the run's second request waits at the receiver, while the run goes on."""
    deadline = time.monotonic() + 120
    while receiver.requests < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_run_killed_while_writing_back_then_resumed_annotates_each_row_once(receiver: OtlpReceiver,
                                                                             tmp_path: Path) -> None:
    logs, out = _logs(tmp_path, COPIES), tmp_path / "out.jsonl"
    args = ["score", str(logs), "-o", str(out), "--offline", "--quiet", "--pages", str(FIXTURES / "pages"),
            "--chunk-size", "50", "--cache-dir", str(tmp_path / "cache"), "--annotate", f"otlp:{receiver.url}"]
    receiver.gate, receiver.hold_after = threading.Event(), 1  # the first batch (512 rows) is stored; the next waits
    proc = subprocess.Popen([sys.executable, "-m", "tlmscore", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _held(receiver, proc)
        assert proc.poll() is None, "the run ended before its second batch: give it more records"
        receiver.fail_next = 1  # the request the killed run leaves is refused, not stored
        os.killpg(proc.pid, signal.SIGKILL)  # the run is killed mid-way, its second batch unanswered
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    receiver.gate.set()
    deadline = time.monotonic() + 20
    while receiver.fail_next and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(receiver.records) == BATCH and not out.exists()
    progress = progress_path(out)
    assert _steps(progress)[-1]["done"] == BATCH

    assert main([*args, "--resume"]) == 0
    rows = list(read_rows(out))
    assert sorted(row.line for row in rows) == list(range(1, COPIES * RECORDS + 1))  # each record once
    ids = [row.id for row in rows]
    assert len(set(ids)) == len(ids)
    sent = [next(a.value.string_value for a in r.attributes if a.key == "tlmscore.record.id") for r in receiver.records]
    assert sent == ids  # every row's annotation once, in the output's order: none again, none lost
    assert not progress.exists()


def test_rows_that_failed_before_a_kill_are_in_the_side_file_after_the_resume(tmp_path: Path) -> None:
    target, side, progress = f"otlp-json:{tmp_path / 'missing' / 'events.jsonl'}", tmp_path / "side.jsonl", \
        tmp_path / "progress"  # a file in a folder that does not exist: every batch fails at once
    rows = [{"id": f"r{i}", "source": "log.jsonl", "line": i, "scorer": "grounding", "score": 0.5} for i in range(ROWS)]
    killed = WriteBack([target], side, threshold=0.5, progress=progress)
    killed.add(rows)
    deadline = time.monotonic() + 10
    while not _steps(progress) and time.monotonic() < deadline:  # the first batch failed and is kept
        time.sleep(0.01)
    (step,) = _steps(progress)
    assert step["done"] == BATCH and [r["id"] for r in step["failed"]] == [r["id"] for r in rows[:BATCH]]
    assert not side.exists()  # the run is killed here: its side file is written only at the end

    resumed = WriteBack([target], side, threshold=0.5, progress=progress, resume=True)
    resumed.add(rows)  # a resumed run hands over the earlier run's rows again
    finished = resumed.finish()
    assert finished.reports[0].rows == ROWS - BATCH  # only the rows the killed run had not done with
    assert [r["id"] for r in finished.left] == [r["id"] for r in rows]  # each failed row kept, once
    assert [json.loads(line)["id"] for line in side.read_text(encoding="utf-8").splitlines()] == [r["id"] for r in rows]
    assert not progress.exists()
