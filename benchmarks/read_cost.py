"""The cost of reading one input file with `tlmscore.read_transcripts`, measured in a child process.

Shared by the benchmarks that compare input formats. Peak RSS comes from /proc (VmHWM, the child's
own): getrusage's ru_maxrss survives exec on Linux, so it would report the parent's peak (which
wrote the inputs) instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import sys, time
from tlmscore import read_transcripts
start = time.process_time()
n = sum(1 for t in read_transcripts(sys.argv[1]) if t.error is None)
cpu = time.process_time() - start
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(n, round(cpu, 2), peak // 1024)
"""


def measure(path: Path) -> str:
    """Records read without error, CPU seconds, records per CPU second and peak RSS, as one line."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
    n, cpu, rss = out.stdout.split()
    return f"{n} records, {cpu} CPU s ({int(n) / max(float(cpu), 0.01):,.0f}/s), peak RSS {rss} MB"
