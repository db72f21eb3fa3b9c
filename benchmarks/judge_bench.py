"""Judge throughput with concurrency N against 1, on a local OpenAI-compatible server with fixed latency.

A fake OpenAI-compatible server (`python -m tests.servers.judge_server`) runs in a process of its own on
127.0.0.1 and answers every chat completion after a fixed latency with a rating and its token
log-probabilities. The judge scores the same inputs with concurrency 1 and N; the script prints the
wall times, the requests served and the largest number in flight (counted at the server), the
rows per second, and the speed-up ratio next to the ideal min(N, requests the rows allow at once).

    python benchmarks/judge_bench.py                      # 64 inputs, 2 reflections, 50 ms, N = 16
    python benchmarks/judge_bench.py --inputs 200 --latency 0.1 --concurrency 64 --samples 1

With `--batch`, the judge's Batch API mode instead, against the fake Files/Batches server
(`python -m tests.servers.batch_server`, its own process): the wall time of a first run (input file
written, uploaded, batch polled, output downloaded and joined) and of a rerun that finds every
result in its state folder, i.e. the judge's own overhead per row, without the Batch API's wait.

    python benchmarks/judge_bench.py --batch --inputs 10000
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tlmscore.model import ScoringInput
from tlmscore.scoring import get_scorer

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def server(latency: float, module: str = "tests.servers.judge_server") -> Iterator[str]:
    """A fake server in a child process; yields its base URL and stops it at the end."""
    extra = ["--latency", str(latency)] if module == "tests.servers.judge_server" else []
    process = subprocess.Popen([sys.executable, "-m", module, *extra],
                               cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def run(url: str, inputs: list[ScoringInput], concurrency: int, samples: int) -> float:
    scorer = get_scorer("judge", {"model": "bench", "base_url": url, "concurrency": concurrency,
                                  "samples": samples, "retries": 0})
    start = time.perf_counter()
    scores = asyncio.run(scorer.score_many(inputs))
    elapsed = time.perf_counter() - start
    failed = [s.error for s in scores if s.error]
    if failed or len(scores) != len(inputs):
        raise SystemExit(f"{len(failed)} rows failed: {failed[:1]}")
    return elapsed


def run_batch(inputs: list[ScoringInput], samples: int) -> None:
    """First run and rerun of the Batch API mode against the fake Files/Batches server."""
    with server(0.0, "tests.servers.batch_server") as url, tempfile.TemporaryDirectory() as folder:
        options = {"model": "bench", "base_url": url, "samples": samples, "batch": True, "batch_dir": folder,
                   "poll_interval": 0.05, "max_poll_interval": 0.2}
        for label in ("first run", "rerun"):
            start = time.perf_counter()
            scores = asyncio.run(get_scorer("judge", options).score_many(inputs))
            elapsed = time.perf_counter() - start
            failed = [s.error for s in scores if s.error]
            if failed:
                raise SystemExit(f"{len(failed)} rows failed: {failed[:1]}")
            print(f"batch {label:>9}: {elapsed:7.2f} s, {len(inputs) / elapsed:9.0f} rows/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per request at the server")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--samples", type=int, default=0, help="observed-consistency samples per input")
    parser.add_argument("--batch", action="store_true", help="the Batch API mode against the fake Files/Batches")
    args = parser.parse_args()
    inputs = [ScoringInput(f"User: What is {n} + {n}?\n\nAssistant:", str(2 * n)) for n in range(args.inputs)]
    per_row = 2 + 2 * args.samples
    if args.batch:
        print(f"{args.inputs} inputs x {per_row} requests through the Batch API mode")
        run_batch(inputs, args.samples)
        return
    print(f"{args.inputs} inputs x {per_row} requests, {args.latency * 1000:.0f} ms latency per request")
    results = {}
    for concurrency in (1, args.concurrency):
        with server(args.latency) as url:
            elapsed = run(url, inputs, concurrency, args.samples)
            stats = httpx.get(f"{url}/stats", timeout=10).json()
        results[concurrency] = elapsed
        print(f"concurrency {concurrency:>4}: {elapsed:7.2f} s, {stats['calls']} requests, "
              f"max {stats['max_in_flight']} in flight, {args.inputs / elapsed:8.1f} rows/s")
    ratio = results[1] / results[args.concurrency]
    ideal = min(args.concurrency, args.inputs * per_row)
    print(f"speed-up with concurrency {args.concurrency} over 1: {ratio:.1f}x (ideal {ideal}x)")


if __name__ == "__main__":
    main()
