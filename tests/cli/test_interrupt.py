"""Ctrl-C during a run: one line saying how many rows are kept and how to go on; `--resume` finishes the run.

The command runs in a process group of its own with SIGINT's default action (a background job
of a shell ignores it), and SIGINT goes to the whole group, as a terminal's Ctrl-C does: the
extraction workers get it too.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.paths import FIXTURES
from tlmscore.cli import main

COPIES = 60
"""The demo's lines, this many times: a run long enough for SIGINT to land between its chunks."""
CHUNK = 10
INTERRUPTED = 130


def default_sigint() -> None:
    """In the child, before it starts: SIGINT does what it does in a terminal (Python raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def saved_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_ctrl_c_keeps_the_rows_so_far_and_resume_finishes_with_one_row_per_record(tmp_path: Path) -> None:
    lines = [line for line in (FIXTURES / "demo.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    logs = tmp_path / "logs.jsonl"
    logs.write_text("\n".join(lines * COPIES) + "\n", encoding="utf-8")
    records = len(lines) * COPIES
    out, checkpoint = tmp_path / "out.jsonl", tmp_path / "out.jsonl.partial.jsonl"
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
    kept = [json.loads(line) for line in checkpoint.read_text(encoding="utf-8").splitlines()]
    assert int(found.group(1)) == len(kept)
    assert 2 * CHUNK <= len(kept) < records and not out.exists()
    assert [row["line"] for row in kept] == list(range(1, len(kept) + 1))  # whole rows, in order, none cut

    assert main([*args, "--resume", "--quiet"]) in (0, 1)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(row["line"] for row in rows) == list(range(1, records + 1))  # each record exactly once
    assert rows[: len(kept)] == kept  # the rows kept are the rows of the finished output
