"""Scoring runs: the score command's columns, and a killed run resumed without lost or doubled rows."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.evidence_server import EvidenceServer, Reply, html_page
from tlmscore.cli import main
from tlmscore.output._checkpoint import checkpoint_path

RECORDS = 2000
CHUNK = 100


def record(i: int, url: str) -> str:
    text = f"Station {i} reported {i % 7 + 10} degrees at noon."
    return json.dumps({
        "id": f"rec-{i:05d}",
        "request": {"input": f"What did station {i} report?", "tools": [{"type": "web_search"}]},
        "response": {"id": f"resp_{i}", "object": "response", "model": "gpt-4.1", "output": [
            {"type": "web_search_call", "id": f"ws_{i}", "status": "completed",
             "action": {"type": "search", "query": f"station {i}", "sources": [{"type": "url", "url": url}]}},
            {"type": "message", "id": f"msg_{i}", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": text, "annotations": [
                 {"type": "url_citation", "url": url, "title": "Report", "start_index": 0,
                  "end_index": len(text)}]}]}]}})


def saved_rows(partial: Path) -> int:
    """Rows in the complete part files of a Parquet checkpoint (a part being written is not counted)."""
    return sum(pq.ParquetFile(part).metadata.num_rows for part in sorted(partial.glob("part-*.parquet")))


def serve_reports(srv: EvidenceServer, records: int, chunk: int, gate: threading.Event, open_blocks: int) -> None:
    """One report page per chunk of records (`/report/<block>`), stating what each `record` cites.

    The first `open_blocks` pages are served at once, the others once `gate` is set: a run cannot
    get past them before the test lets it, however fast the machine."""
    for block in range(records // chunk):
        paragraphs = [f"Station {i} reported {i % 7 + 10} degrees at noon." for i in
                      range(block * chunk, (block + 1) * chunk)]
        held = gate if block >= open_blocks else None
        srv.route(f"/report/{block}", Reply(200, html_page(f"Report {block}", *paragraphs), gate=held))


def write_log(path: Path, srv: EvidenceServer, records: int, chunk: int) -> None:
    """A log of `records` records, each citing the report page of its chunk on `srv` (see `serve_reports`)."""
    path.write_text("\n".join(record(i, srv.url(f"/report/{i // chunk}")) for i in range(records)) + "\n",
                    encoding="utf-8")


def kill_when_saved(proc: subprocess.Popen[bytes], saved: Callable[[], int], at_least: int, timeout: float) -> None:
    """SIGKILL `proc` once `saved()` reaches `at_least`; it must still be running until then, and
    get there within `timeout` seconds (else the test fails: the run is killed all the same)."""
    deadline = time.monotonic() + timeout
    while saved() < at_least:
        assert proc.poll() is None, "the run ended before it could be interrupted"
        if time.monotonic() > deadline:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            pytest.fail(f"{saved()} rows saved after {timeout:.0f} s, not the {at_least} the test waits for")
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.fixture
def later_reports() -> Iterator[threading.Event]:
    """Set to serve the last report page (set at the end in any case): the run cannot end before it."""
    gate = threading.Event()
    yield gate
    gate.set()


@pytest.fixture
def server(later_reports: threading.Event) -> Iterator[EvidenceServer]:
    with EvidenceServer() as srv:
        serve_reports(srv, RECORDS, CHUNK, later_reports, open_blocks=RECORDS // CHUNK - 1)
        yield srv
        later_reports.set()  # before the server stops, so no request is left held


def test_a_killed_run_resumes_to_exactly_one_row_per_record(tmp_path: Path, server: EvidenceServer,
                                                          later_reports: threading.Event) -> None:
    log = tmp_path / "log.jsonl"
    write_log(log, server, RECORDS, CHUNK)
    out = tmp_path / "scores.parquet"
    args = [sys.executable, "-m", "tlmscore", "score", str(log), "-o", str(out), "--cache-dir", str(tmp_path / "c"),
            "--allow-host", "127.0.0.1", "--chunk-size", str(CHUNK)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = checkpoint_path(out)
    kill_when_saved(proc, lambda: saved_rows(partial), 3 * CHUNK, timeout=60)
    written = saved_rows(partial)
    assert 3 * CHUNK <= written < RECORDS
    assert not out.exists()
    later_reports.set()

    done = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr
    df = pd.read_parquet(out)
    assert len(df) == RECORDS
    assert df.id.is_unique
    assert sorted(df.id) == [f"rec-{i:05d}" for i in range(RECORDS)]
    assert list(df.line) == sorted(df.line)
    assert df.score.notna().all() and df.error.isna().all()
    assert not partial.exists()


def test_score_command_adds_score_columns(tmp_path: Path, demo_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.jsonl"
    code = main(["score", str(demo_path), "-o", str(out), "--offline", "--pages", str(demo_path.parent / "pages"),
                 "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 17
    assert all(r["scorer"] == "grounding" for r in rows)
    scored = [r for r in rows if r["score"] is not None]
    assert scored and all(0 <= r["score"] <= 1 for r in scored)
    assert all(r["score"] is None for r in rows if r["error"])
    assert "scored:" in err and "lowest:" in err and "median" in err


def test_unknown_scorer_and_missing_key_are_usage_errors(tmp_path: Path, demo_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["score", str(demo_path), "-o", str(tmp_path / "o.jsonl"), "--scorer", "nope"])
    assert usage.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    monkeypatch.delenv("CLEANLAB_API_KEY", raising=False)
    code = main(["score", str(demo_path), "-o", str(tmp_path / "o.jsonl"), "--scorer", "tlm", "--offline"])
    assert code == 2
    assert "CLEANLAB_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_score_api_returns_nan_for_unscorable_rows(demo_path: Path, tmp_path: Path) -> None:
    import tlmscore
    from tlmscore import MemoryPages, Settings
    from tlmscore.output import ROW_COLUMNS

    df = tlmscore.score(demo_path, settings=Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    assert list(df.columns[:len(ROW_COLUMNS)]) == list(ROW_COLUMNS)
    assert list(df.columns[len(ROW_COLUMNS):len(ROW_COLUMNS) + 4]) == ["scorer", "score", "explanation", "details"]
    plain = df[df.id == "support-password-reset"].iloc[0]
    assert math.isnan(plain.score) and plain.explanation
