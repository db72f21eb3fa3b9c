"""Batch throughput: records per second of the local engine on one core and every core, and of Ray on 1 and 2 nodes.

The records are copies of the labelled fixtures (`fixtures/labelled/labelled.jsonl`: web search and tool answers
with cited pages), each with its own id, scored offline by the grounding scorer against the fixtures' saved pages
(`tlmscore score --offline --pages fixtures/labelled/pages`, the command line's own run, output JSONL). Each
configuration runs in a process of its own, alternating, `--runs` times:

- `one core`: pinned to one core (`taskset -c 0`) and scoring in the run's own process (`score_workers=1`);
- `all cores`: every core of the machine, the default (`score_workers=None`: one scoring process per core);
- with `--ray` (root: the test cluster's network and PID namespaces, `tests/servers/ray_cluster.py`), `ray 1 node`
  and `ray 2 nodes`: `--engine ray` on a local cluster of a head node (and a worker node), 2 CPUs each, on the same
  cores. The cluster's own start is not timed; connecting, actors and every dataset-wide step are.

Before each timed run, the same configuration scores `--small` records: its wall time is the start-up stated, and
the cost per record after start-up is `(wall - small wall) / (records - small)`.

Printed: wall time, records/s, records/s per core used, peak RSS of the run and its worker processes (the largest
of any one, and their sum is not taken: the workers' peaks need not coincide; for Ray, also the largest sum over
every process of the cluster, sampled each 0.5 s), median and spread (max/min - 1) of the runs, and the ratio of
the medians. Every configuration's output is compared byte for byte with the first configuration's (by SHA-256;
each output is removed once hashed, so that a million-record run needs the disk of one output at a time), and each
run's line ends with its summary line (rows, errors), which says whether outputs that differ differ in errors.

    python benchmarks/throughput.py --records 100000 --runs 3 [--ray] [--only CONFIG ...]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LABELLED = ROOT / "fixtures" / "labelled"
sys.path.insert(0, str(ROOT))  # the Ray runs use the test cluster (`tests/servers/ray_cluster.py`)

_CHILD = """
import resource, sys
from tlmscore.__main__ import own_process
own_process()  # the process set up as the tlmscore executable's
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


def _score(data: Path, out: Path) -> list[str]:
    return ["score", str(data), "-o", str(out), "--offline", "--quiet", "--pages", str(LABELLED / "pages")]


def _local(config: str, data: Path, out: Path) -> tuple[float, int, str]:
    """One local run's wall seconds, peak RSS (bytes) of the run or any of its worker processes, and its summary."""
    pin = ["taskset", "-c", "0"] if config == "one core" else []
    command = [*pin, sys.executable, "-c", _CHILD, *_score(data, out),
               *(["--score-workers", "1"] if config == "one core" else [])]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{config}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    peak = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("PEAK "))
    return seconds, peak * 1024, summary(done.stderr)


def summary(stderr: str) -> str:
    """The last run's summary line in a command's `stderr` (its rows and errors), without the `tlmscore: ` prefix."""
    lines = [line.removeprefix("tlmscore: ") for line in stderr.splitlines() if " records → " in line]
    return lines[-1] if lines else "no summary line"


def digest(path: Path) -> str:
    """The SHA-256 of `path`'s bytes, read in blocks; the file is removed after."""
    sha = hashlib.sha256()
    with path.open("rb") as read:
        while block := read.read(1 << 20):
            sha.update(block)
    path.unlink()
    return sha.hexdigest()


def run(config: str, data: Path, small: Path, out: Path) -> dict[str, Any]:
    """A configuration's start-up run (`small`) and timed run: wall seconds of each, peak RSS (bytes), its summary."""
    if config.startswith("ray"):
        from tests.servers.ray_cluster import namespaced

        nodes = config.split()[1]
        done = namespaced([sys.executable, __file__, "--inside", nodes, str(small), str(data), str(out)], timeout=14400)
        if done.returncode != 0:
            sys.exit(f"{config}: exit {done.returncode}: {done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return {**result, "summary": summary(done.stderr)}
    startup, _, _ = _local(config, small, out.with_suffix(".small.jsonl"))
    seconds, peak, said = _local(config, data, out)
    return {"startup": startup, "seconds": seconds, "peak": peak, "summary": said}


def _rss_poll(peaks: dict[str, int], stop: threading.Event) -> None:
    """Every 0.5 s: the largest RSS of any process so far (`largest`) and of all of them together (`total`)."""
    while not stop.wait(0.5):
        sizes = []
        for status in Path("/proc").glob("[0-9]*/status"):
            with contextlib.suppress(OSError):
                fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
                sizes.append((int(fields.get("VmRSS", "0 kB").split()[0]), int(fields.get("VmHWM", "0 kB").split()[0])))
        peaks["largest"] = max([peaks["largest"], *(hwm * 1024 for _, hwm in sizes)])
        peaks["total"] = max(peaks["total"], 1024 * sum(rss for rss, _ in sizes))


def inside(nodes: int, small: Path, data: Path, out: Path) -> None:
    """In the namespaces: a cluster of `nodes`, the start-up run and the timed run; prints their figures as JSON."""
    from tests.servers.ray_cluster import Cluster
    from tlmscore.cli import main as cli

    peaks, stop = {"largest": 0, "total": 0}, threading.Event()
    with Cluster(out.parent / f"ray-{out.stem}", memory=1_000_000_000, worker=nodes == 2) as cluster:
        ray = ["--engine", "ray", "--address", cluster.address]
        walls = []  # the start-up run twice, so that the one kept finds the cluster as the timed run does
        for source, target in ((small, out.with_suffix(".warm.jsonl")), (small, out.with_suffix(".small.jsonl")),
                               (data, out)):
            if target == out:
                threading.Thread(target=_rss_poll, args=(peaks, stop), daemon=True).start()
            start = time.perf_counter()
            if cli([*_score(source, target), *ray]) != 0:
                sys.exit(f"ray {nodes}: the run failed")
            walls.append(time.perf_counter() - start)
        stop.set()
    print(json.dumps({"first": walls[0], "startup": walls[1], "seconds": walls[2], "peak": peaks["largest"],
                      "total": peaks["total"]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--small", type=int, default=250, help="records of each start-up run")
    parser.add_argument("--ray", action="store_true", help="also Ray on 1 and 2 nodes of a local cluster (root)")
    parser.add_argument("--only", action="append", metavar="CONFIG",
                        help="run only this configuration (repeatable): one core, all cores, ray 1 node, ray 2 nodes")
    parser.add_argument("--inside", nargs=4, help=argparse.SUPPRESS)  # NODES SMALL DATA OUT, in the namespaces
    args = parser.parse_args()
    if args.inside:
        inside(int(args.inside[0]), *(Path(p) for p in args.inside[1:]))
        return
    if shutil.which("taskset") is None:
        sys.exit("throughput.py: needs taskset (util-linux) to pin the one-core runs")
    cores = len(os.sched_getaffinity(0))
    configs = {"one core": 1, "all cores": cores, **({"ray 1 node": cores, "ray 2 nodes": cores} if args.ray else {})}
    if args.only:
        if unknown := set(args.only) - set(configs):
            sys.exit(f"throughput.py: no configuration {sorted(unknown)} (of {list(configs)}; Ray's need --ray)")
        configs = {c: used for c, used in configs.items() if c in args.only}
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        os.environ["TLMSCORE_CACHE_DIR"] = str(base / "cache")  # for every run and the cluster's nodes
        data, small = base / "records.jsonl", base / "small.jsonl"
        records(args.records, data)
        records(args.small, small)
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
        hashes: set[str] = set()
        for n in range(args.runs):
            for config in configs:
                out = base / f"{config.replace(' ', '-')}-{n}.jsonl"
                got = run(config, data, small, out)
                sha = digest(out)
                hashes.add(sha)
                runs[config].append(got)
                first = f" (first on a new cluster: {got['first']:.1f} s)" if "first" in got else ""
                print(f"run {n + 1}, {config}: {got['seconds']:.1f} s, {args.records / got['seconds']:.0f} records/s, "
                      f"start-up run {got['startup']:.1f} s{first}, peak RSS {got['peak'] / 2**20:.0f} MiB, "
                      f"output SHA-256 {sha[:16]}; {got['summary']}", file=sys.stderr)
        same = len(hashes) == 1
    _table(runs, configs, args.records, args.records - args.small)
    print(f"\n{args.records:,} records, {args.runs} runs each, {cores} cores; every output byte-equal: {same}")


def _table(runs: dict[str, list[dict[str, Any]]], configs: dict[str, int], records: int, after: int) -> None:
    """The medians of each configuration, and its cost per record after start-up against the local engine's."""
    def median(config: str, key: str) -> float:
        return float(statistics.median(r[key] for r in runs[config]))

    base = "all cores" if "all cores" in runs else next(iter(runs))

    def per_record(config: str) -> float:  # ms per record after start-up, median over the runs
        return float(statistics.median(1000 * (r["seconds"] - r["startup"]) / after for r in runs[config]))

    print("| run | median wall (s) | spread | records/s | records/s per core | start-up (s) "
          f"| ms per record after start-up | against {base} | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for config, used in configs.items():
        walls = [r["seconds"] for r in runs[config]]
        rate = records / median(config, "seconds")
        total = f" ({max(r['total'] for r in runs[config]) / 2**20:,.0f} all processes)" if "total" in runs[config][0] \
            else ""
        print(f"| {config} | {median(config, 'seconds'):.1f} | {100 * (max(walls) / min(walls) - 1):.0f} % "
              f"| {rate:,.0f} | {rate / used:,.0f} | {median(config, 'startup'):.1f} | {per_record(config):.2f} "
              f"| {per_record(config) / per_record(base):.2f}x "
              f"| {max(r['peak'] for r in runs[config]) / 2**20:,.0f}{total} |")
    if {"one core", "all cores"} <= set(runs):
        print(f"\nall cores / one core: {median('one core', 'seconds') / median('all cores', 'seconds'):.2f}x")


if __name__ == "__main__":
    main()
