"""Ctrl-C during a run: one line saying how many rows are kept and how to go on; `--resume` finishes the run.

The command runs in a process group of its own with SIGINT's default action (a background job
of a shell ignores it), and SIGINT goes to the whole group, as a terminal's Ctrl-C does: the
extraction workers get it too.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES
from tlmscore.cli import main
from tlmscore.output import read_rows

COPIES = 60
"""The demo's lines, this many times: a run long enough for SIGINT to land between its chunks."""
CHUNK = 10
INTERRUPTED = 130


def default_sigint() -> None:
    """In the child, before it starts: SIGINT does what it does in a terminal (Python raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def saved_lines(path: Path) -> int:
    """About how many rows are saved so far (a CSV row ends in CRLF, after a header)."""
    if not path.exists():
        return 0
    return path.read_bytes().count(b"\r\n") - 1 if path.suffix == ".csv" else path.read_bytes().count(b"\n")


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_ctrl_c_keeps_the_rows_so_far_and_resume_finishes_with_one_row_per_record(tmp_path: Path, suffix: str) -> None:
    lines = [line for line in (FIXTURES / "demo.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    logs = tmp_path / "logs.jsonl"
    logs.write_text("\n".join(lines * COPIES) + "\n", encoding="utf-8")
    records = len(lines) * COPIES
    out, checkpoint = tmp_path / f"out{suffix}", tmp_path / f"out{suffix}.partial{suffix}"
    args = ["score", str(logs), "-o", str(out), "--offline", "--pages", str(FIXTURES / "pages"),
            "--chunk-size", str(CHUNK), "--cache-dir", str(tmp_path / "cache")]
    proc = subprocess.Popen([sys.executable, "-m", "tlmscore", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_sigint)  # noqa: PLW1509
    try:
        deadline = time.monotonic() + 120
        while saved_lines(checkpoint) < 2 * CHUNK and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be interrupted: give it more records"
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "Traceback" not in stdout + stderr
    assert proc.returncode == INTERRUPTED, stderr
    (said,) = stderr.splitlines()
    found = re.fullmatch(rf"tlmscore: interrupted: (\d+) rows kept in {re.escape(str(checkpoint))}; rerun the same "
                         r"command with --resume to finish", said)
    assert found is not None, said
    kept = [row.line for row in read_rows(checkpoint)]
    assert int(found.group(1)) == len(kept)
    assert 2 * CHUNK <= len(kept) < records and not out.exists()
    assert kept == list(range(1, len(kept) + 1))  # whole rows, in order, none cut
    saved = checkpoint.read_bytes()

    assert main([*args, "--resume", "--quiet"]) in (0, 1)
    rows = [row.line for row in read_rows(out)]
    assert sorted(rows) == list(range(1, records + 1))  # each record exactly once
    assert out.read_bytes().startswith(saved)  # the rows kept are the first of the output, bytes as written
