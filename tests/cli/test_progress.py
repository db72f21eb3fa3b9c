"""Progress on a terminal: a bar of the input's bytes with a percent, a sane first rate, redrawn while a run
works; off a terminal, stderr holds the summary and nothing else."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.support.paths import ROOT

RECORDS = 3000
_UNITS = {"": 1, "k": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


def write_log(path: Path) -> Path:
    lines = [json.dumps({"id": f"r{i}", "request": {"messages": [{"role": "user", "content": f"What is {i} + {i}?"}]},
                         "response": {"id": f"c{i}", "object": "chat.completion", "model": "m", "choices": [
                             {"index": 0, "message": {"role": "assistant", "content": f"It is {2 * i}."},
                              "finish_reason": "stop"}]}}) for i in range(RECORDS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def command(tmp_path: Path) -> list[str]:
    log = write_log(tmp_path / "log.jsonl")
    return [sys.executable, "-m", "tlmscore", "score", str(log), "-o", str(tmp_path / "out.jsonl"), "--offline",
            "--cache-dir", str(tmp_path / "c"), "--chunk-size", "500"]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def read_all(fd: int, proc: subprocess.Popen[bytes], limit: float = 240) -> bytes:
    """Everything written to the terminal `fd` until the process ends."""
    out = b""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    return out


def test_a_terminal_shows_a_bar_of_the_inputs_bytes_with_a_percent_and_a_sane_rate(tmp_path: Path) -> None:
    args = command(tmp_path)
    size = (tmp_path / "log.jsonl").stat().st_size
    main, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a terminal 120 columns wide
    with subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=secondary,
                          env=env()) as proc:
        os.close(secondary)
        try:
            shown = read_all(main, proc).decode("utf-8", "replace")
        finally:
            os.close(main)
        assert proc.wait(timeout=60) == 0, shown
    frames = re.split(r"[\r\n]", shown)
    bars = [f for f in frames if re.search(r"input:\s+\d+%\|", f)]
    assert bars, shown
    percents = [int(re.search(r"input:\s+(\d+)%", f).group(1)) for f in bars]  # type: ignore[union-attr]
    assert percents[0] == 0 and percents[-1] == 100 and percents == sorted(percents)
    assert len(set(percents)) > 2  # it moved on the way, not only at the end
    assert any(f"{RECORDS:,} records" in f for f in bars)
    for number, unit in re.findall(r"([\d.]+)([kMG]?)B/s", shown):
        # the bar's clock starts with the run: no rate above the whole input in a fiftieth of a second
        assert float(number) * _UNITS[unit] <= 50 * size, shown
    assert "tlmscore: 3000 records → " in shown  # the summary follows the bars


def test_off_a_terminal_stderr_holds_only_the_summary(tmp_path: Path) -> None:
    proc = subprocess.run(command(tmp_path), capture_output=True, text=True, timeout=240, env=env(), check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(f"tlmscore: {RECORDS} records → ")
    assert all(line.startswith(("tlmscore: ", "  ")) for line in lines), proc.stderr
    assert "%" not in proc.stderr and "\r" not in proc.stderr and "records:" not in proc.stderr
