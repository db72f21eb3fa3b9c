"""Streaming: peak memory and throughput of `tlmscore score` (offline, grounding) or `prepare` at 10k and 100k records.

Each record is a web-search answer citing a page from a saved page bundle, so every row is
converted, rendered and scored. Prints records/s and peak RSS of the scoring process per size;
time should grow linearly with records and memory stay flat (under 300 MB at 100k).

    python benchmarks/stream_bench.py [--sizes 10000 100000] [--command score|prepare]

The script runs `sys.executable -m tlmscore`, so running it with another environment's Python
measures that environment's tlmscore (how the before/after rows of a change are taken).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAGES = 50


def page_record(k: int) -> dict[str, object]:
    text = "\n\n".join(f"Station {k} logged {k % 9 + 10} degrees on day {d}, with winds of {d % 30} km/h."
                       for d in range(40))
    return {"url": f"https://weather.example/stations/{k}", "final_url": None, "status": "ok", "http_status": 200,
            "content_type": "text/html", "title": f"Station {k}", "text": text, "bytes": len(text),
            "fetched_at": 0.0, "error": None}


def record(i: int) -> str:
    k = i % PAGES
    url = f"https://weather.example/stations/{k}"
    text = f"Station {k} logged {k % 9 + 10} degrees on day {i % 40}, with winds of {i % 40 % 30} km/h."
    return json.dumps({
        "id": f"r{i}",
        "request": {"model": "gpt-4.1", "input": f"What did station {k} log on day {i % 40}?",
                    "tools": [{"type": "web_search"}]},
        "response": {"id": f"resp_{i}", "object": "response", "model": "gpt-4.1", "output": [
            {"type": "web_search_call", "id": f"ws_{i}", "status": "completed",
             "action": {"type": "search", "query": f"station {k}", "sources": [{"type": "url", "url": url}]}},
            {"type": "message", "id": f"m_{i}", "role": "assistant", "status": "completed", "content": [
                {"type": "output_text", "text": text, "annotations": [
                    {"type": "url_citation", "url": url, "title": f"Station {k}", "start_index": 0,
                     "end_index": len(text)}]}]}]}})


def run(size: int, folder: Path, command: str) -> tuple[float, float]:
    log = folder / f"log-{size}.jsonl"
    with log.open("w", encoding="utf-8") as handle:
        for i in range(size):
            handle.write(record(i) + "\n")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tlmscore", command, str(log), "-o", str(folder / f"out-{size}.parquet"),
                    "--offline", "--pages", str(folder / "pages.jsonl"), "--cache-dir", str(folder / "cache"),
                    "--quiet"], check=True, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--command", choices=("score", "prepare"), default="score",
                        help="score with grounding (default), or prepare only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "pages.jsonl").write_text("\n".join(json.dumps(page_record(k)) for k in range(PAGES)) + "\n",
                                            encoding="utf-8")
        results = []
        for size in sorted(args.sizes):
            elapsed, peak_mb = run(size, folder, args.command)
            results.append((size, elapsed, peak_mb))
            print(f"{size:>8} records: {elapsed:7.1f} s  {size / elapsed:8.0f} records/s  peak RSS {peak_mb:6.0f} MB "
                  "(largest so far among runs)")
        if len(results) > 1:
            (s0, t0, _), (s1, t1, _) = results[0], results[-1]
            print(f"time ratio {t1 / t0:.2f} for a size ratio of {s1 / s0:.0f} (linear: {s1 / s0:.0f})")


if __name__ == "__main__":
    main()
