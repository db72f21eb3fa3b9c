"""Batch throughput of the local engine: records per second on one core and on every core, with peak memory.

The records are copies of the labelled fixtures (`fixtures/labelled/labelled.jsonl`: web search and tool answers
with cited pages), each with its own id, scored offline by the grounding scorer against the fixtures' saved pages
(`tlmscore score --offline --pages fixtures/labelled/pages`, the command line's own run, output JSONL). Each
configuration runs in a process of its own, alternating, `--runs` times:

- `one core`: pinned to one core (`taskset -c 0`) and scoring in the run's own process (`score_workers=1`);
- `all cores`: every core of the machine, the default (`score_workers=None`: one scoring process per core).

Printed: wall time, records/s, records/s per core used, peak RSS of the run and its worker processes (the largest
of any one, and their sum is not taken: the workers' peaks need not coincide), median and spread
(max/min - 1) of the runs, and the ratio of the medians. The outputs of the two configurations are compared
byte for byte after removing each run's paths.

    python benchmarks/throughput.py --records 100000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABELLED = ROOT / "fixtures" / "labelled"

_CHILD = """
import resource, sys
from tlmscore.cli import main
code = main(sys.argv[1:])
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stderr.write(f"\\nPEAK {max(me.ru_maxrss, kids.ru_maxrss)}\\n")
raise SystemExit(code)
"""


def records(count: int, path: Path) -> None:
    """`count` copies of the labelled fixtures, each with its own id, as JSON lines."""
    lines = [json.loads(line) for line in (LABELLED / "labelled.jsonl").read_text(encoding="utf-8").splitlines()]
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            record = lines[n % len(lines)]
            out.write(json.dumps({**record, "id": f"{record.get('id')}-{n}"}) + "\n")


def run(config: str, data: Path, out: Path, cache: Path) -> tuple[float, int]:
    """One run's wall seconds and peak RSS (bytes) of the run or any of its worker processes."""
    pin = ["taskset", "-c", "0"] if config == "one core" else []
    env = {**os.environ, "TLMSCORE_CACHE_DIR": str(cache)}
    command = [*pin, sys.executable, "-c", _CHILD, "score", str(data), "-o", str(out), "--offline", "--quiet",
               "--pages", str(LABELLED / "pages"), *(["--score-workers", "1"] if config == "one core" else [])]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{config}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    peak = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("PEAK "))
    return seconds, peak * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("taskset") is None:
        sys.exit("throughput.py: needs taskset (util-linux) to pin the one-core runs")
    cores = len(os.sched_getaffinity(0))
    configs = {"one core": 1, "all cores": cores}
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        data = base / "records.jsonl"
        records(args.records, data)
        times: dict[str, list[float]] = {c: [] for c in configs}
        peaks: dict[str, list[int]] = {c: [] for c in configs}
        for n in range(args.runs):
            for config in configs:
                seconds, peak = run(config, data, base / f"{config.replace(' ', '-')}-{n}.jsonl", base / "cache")
                times[config].append(seconds)
                peaks[config].append(peak)
                print(f"run {n + 1}, {config}: {seconds:.1f} s, {args.records / seconds:.0f} records/s, "
                      f"peak RSS {peak / 2**20:.0f} MiB", file=sys.stderr)
        same = (base / "one-core-0.jsonl").read_bytes() == (base / "all-cores-0.jsonl").read_bytes()
    print(f"{args.records:,} records, {args.runs} runs each, {cores} cores; rows byte-equal: {same}\n")
    print("| run | median wall (s) | spread | records/s | records/s per core | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|")
    for config, used in configs.items():
        median = statistics.median(times[config])
        spread = max(times[config]) / min(times[config]) - 1
        rate = args.records / median
        print(f"| {config} | {median:.1f} | {100 * spread:.0f} % | {rate:,.0f} | {rate / used:,.0f} "
              f"| {max(peaks[config]) / 2**20:.0f} |")
    ratio = statistics.median(times["one core"]) / statistics.median(times["all cores"])
    print(f"\nall cores / one core: {ratio:.2f}x")


if __name__ == "__main__":
    main()
