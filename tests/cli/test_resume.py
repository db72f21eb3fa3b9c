"""Scoring runs: the score command's columns, and a killed run resumed without lost or doubled rows."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.servers.evidence_server import EvidenceServer
from tests.servers.killed_run import kill_when_saved, report_server, write_log
from tlmscore.cli import main
from tlmscore.output._checkpoint import checkpoint_path

RECORDS = 2000
CHUNK = 100


def saved_rows(partial: Path) -> int:
    """Rows in the complete part files of a Parquet checkpoint (a part being written is not counted)."""
    return sum(pq.ParquetFile(part).metadata.num_rows for part in sorted(partial.glob("part-*.parquet")))


@pytest.fixture
def reports() -> Iterator[tuple[EvidenceServer, threading.Event]]:
    """The report pages; the last is served once the gate is set, so the run cannot end before it."""
    with report_server(RECORDS, CHUNK, open_blocks=RECORDS // CHUNK - 1) as running:
        yield running


def test_a_killed_run_resumes_to_exactly_one_row_per_record(
        tmp_path: Path, reports: tuple[EvidenceServer, threading.Event]) -> None:
    server, later_reports = reports
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
