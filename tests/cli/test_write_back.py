"""`score --annotate`'s write-back (`WriteBack`): rows handed over chunk by chunk are sent on a thread of
their own, so a store that is slow to answer does not hold up the run that hands them over."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.otlp_receiver import OtlpReceiver, serve_otlp
from tlmscore.cli._annotate import WriteBack

ROWS = 600
"""More than one OTLP batch (512): the first batch is sent while rows are still being handed over."""


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    yield from serve_otlp()


def test_a_slow_store_does_not_hold_up_the_rows_handed_over(receiver: OtlpReceiver, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
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
    assert back.finish() == 0
    ids = [next(a.value.string_value for a in r.attributes if a.key == "tlmscore.record.id") for r in receiver.records]
    assert ids == [r["id"] for r in rows]  # every row once, in order
    assert f"annotations to otlp:{receiver.url}: {ROWS} of {ROWS} written" in capsys.readouterr().err
