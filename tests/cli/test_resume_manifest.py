"""`--resume` checks the run manifest: the same inputs under another name resume, anything else is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.evidence_server import EvidenceServer
from tests.servers.judge_server import JsonHandler, LoopbackServer
from tests.servers.killed_run import kill_when_saved, report_server, write_log
from tests.support.paths import ROOT
from tlmscore.cli import main
from tlmscore.output._checkpoint import checkpoint_path
from tlmscore.output._manifest import manifest_path, read_manifest

RECORDS = 3000
CHUNK = 100
KILL_AT = 1200


def saved_lines(path: Path) -> int:
    """Complete lines in a JSONL checkpoint."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.fixture
def reports() -> Iterator[tuple[EvidenceServer, threading.Event]]:
    """The report pages; those past the first `KILL_AT` records' are served once the gate is set."""
    with report_server(RECORDS, CHUNK, open_blocks=KILL_AT // CHUNK) as running:
        yield running


def test_kill_9_then_resume_under_another_path_gives_every_row_once(
        tmp_path: Path, reports: tuple[EvidenceServer, threading.Event]) -> None:
    server, later_reports = reports
    log = tmp_path / "log.jsonl"
    write_log(log, server, RECORDS, CHUNK)
    out = tmp_path / "rows.jsonl"
    common = ["-o", "rows.jsonl", "--cache-dir", "c", "--allow-host", "127.0.0.1", "--chunk-size", str(CHUNK)]
    proc = subprocess.Popen([sys.executable, "-m", "tlmscore", "prepare", "log.jsonl", *common], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = checkpoint_path(out)
    kill_when_saved(proc, lambda: saved_lines(partial), KILL_AT, timeout=120)
    written = saved_lines(partial)
    assert KILL_AT <= written < RECORDS
    manifest = read_manifest(manifest_path(out))
    assert manifest is not None and manifest["inputs"][0]["path"] == str(log.resolve())
    later_reports.set()

    resumed = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", str(log.resolve()), *common, "--resume"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{written} records already done" in resumed.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == RECORDS
    counts = Counter(row["line"] for row in rows)
    assert sorted(counts) == list(range(1, RECORDS + 1)) and set(counts.values()) == {1}
    assert Counter(row["id"] for row in rows).most_common(1)[0][1] == 1
    assert all(row["error"] is None and row["n_urls_ok"] == 1 for row in rows)


def finished_run(tmp_path: Path, *extra: str) -> tuple[Path, Path, list[str]]:
    """A finished `score` run over a copy of the demo log; its log, output and arguments."""
    log = tmp_path / "log.jsonl"
    log.write_bytes((ROOT / "fixtures" / "demo.jsonl").read_bytes())
    out = tmp_path / "out.jsonl"
    args = ["-o", str(out), "--offline", "--quiet", "--cache-dir", str(tmp_path / "c"), *extra]
    assert main(["score", str(log), *args]) == 0
    return log, out, args


def test_resume_under_a_symlink_redoes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, out, args = finished_run(tmp_path)
    before = out.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(log)
    capsys.readouterr()
    assert main(["score", str(link), *args, "--resume"]) == 0
    assert "17 records already done" in capsys.readouterr().err
    assert out.read_bytes() == before


@pytest.mark.parametrize(("command", "change", "message"), [
    ("prepare", [], "scorer"),
    ("score", ["--scorer", "judge", "--base-url", "{judge}", "--model", "m"],
     "with scorer 'grounding', this one `score` with scorer 'judge'"),
    ("score", ["--option", "threshold=0.7"], "options of scorer 'grounding'"),
    ("score", ["--urls", "all"], "urls: 'cited' then, 'all' now"),
    ("score", ["--reasoning", "summary"], "reasoning"),
])
def test_resume_with_another_scorer_or_settings_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          command: str, change: list[str], message: str) -> None:
    log, out, args = finished_run(tmp_path)
    before = out.read_bytes()
    capsys.readouterr()
    with LoopbackServer(JsonHandler) as judge:  # an endpoint that answers: the run gets as far as the resume check
        assert main([command, str(log), *args, *(c.replace("{judge}", judge.url) for c in change), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume refused" in err and message in err and "without --resume" in err
    assert out.read_bytes() == before


def test_resume_with_a_changed_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, _, args = finished_run(tmp_path)
    log.write_bytes(log.read_bytes() + log.read_bytes().splitlines(keepends=True)[0])
    capsys.readouterr()
    assert main(["score", str(log), *args, "--resume"]) == 2
    assert "log.jsonl changed since the interrupted run" in capsys.readouterr().err
    other = tmp_path / "other.jsonl"
    other.write_bytes(log.read_bytes())
    assert main(["score", str(other), *args, "--resume"]) == 2
    assert "the interrupted run read" in capsys.readouterr().err


def test_resume_without_a_manifest_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, out, args = finished_run(tmp_path)
    manifest_path(out).unlink()
    capsys.readouterr()
    assert main(["score", str(log), *args, "--resume"]) == 2
    assert "manifest.json is missing" in capsys.readouterr().err
    assert out.exists()


def test_a_file_name_that_is_not_utf8_resumes_without_doubling(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / os.fsdecode(b"caf\xe9.jsonl")
    log.write_bytes((ROOT / "fixtures" / "demo.jsonl").read_bytes())
    out = tmp_path / "out.jsonl"
    args = ["prepare", str(log), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(tmp_path / "c")]
    assert main(args) == 0
    rows = out.read_bytes().split(b"\n")[:-1]
    assert b"caf\xef\xbf\xbd.jsonl" in rows[0]  # U+FFFD where the name's odd byte was
    assert main([*args, "--resume"]) == 0
    assert out.read_bytes().split(b"\n")[:-1] == rows
