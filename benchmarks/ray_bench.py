"""Records per second: the single-machine run and the Ray engine on a local two-node cluster.

Run as root (it makes network and PID namespaces, like the tests):

    python benchmarks/ray_bench.py [RECORDS] [URLS]    # default 20000 records, 2000 unique URLs

Both runs score (grounding) the same generated set, whose pages come from four loopback hosts
(`tests/servers/ray_cluster.py`); each run starts with an empty cache. The Ray run includes connecting to
the cluster and every dataset-wide step (joins, shuffles, actor start-up); not the cluster start.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers.ray_cluster import Cluster, PageServers, generate, namespaced  # noqa: E402


def _timed(argv: list[str]) -> float:
    from tlmscore.cli import main

    start = time.perf_counter()
    code = main(argv)
    if code != 0:
        raise SystemExit(f"run failed ({code}): {argv}")
    return time.perf_counter() - start


def inside(work: Path, records: int, urls: int) -> dict[str, float]:
    """The measurement, inside the namespaces."""
    with PageServers(hosts=4, delay=0.0) as servers, Cluster(work / "ray") as cluster:
        inputs = generate(work / "gen", records, urls, servers.names, files=4)
        web = [f for name in servers.names for f in ("--allow-host", name)] + ["--quiet", "--per-host", "2"]
        local = _timed(["score", *inputs, "-o", str(work / "local.parquet"), "--cache-dir", str(work / "c1"), *web])
        servers.reset()
        ray = _timed(["score", *inputs, "-o", str(work / "ray.parquet"), "--engine", "ray", "--address",
                      cluster.address, "--cache-dir", str(work / "c2"), "--page-store", str(work / "store"), *web])
        seen = servers.reset()
        again = _timed(["score", *inputs, "-o", str(work / "ray-again.parquet"), "--engine", "ray", "--address",
                        cluster.address, "--cache-dir", str(work / "c3"), "--page-store", str(work / "store"), *web])
    counts = [n for host in seen.values() for n in host["counts"].values()]
    return {"records": records, "urls": urls, "local_s": local, "ray_s": ray, "ray_store_s": again,
            "differing_rows": _differing(work / "ray.parquet", work / "local.parquet"),
            "urls_requested": len(counts), "most_requests_per_url": max(counts, default=0),
            "most_in_flight_per_host": max((h["max_in_flight"] for h in seen.values()), default=0)}


def _differing(ray_out: Path, local_out: Path) -> int:
    """Rows of the Ray run that differ from the single-machine run's in any column they share."""
    import math

    import pyarrow.parquet as pq

    ray_rows = pq.read_table(ray_out).to_pylist()  # the same file as one machine's, rows in input order
    local_rows = pq.read_table(local_out).to_pylist()
    if len(ray_rows) != len(local_rows):
        return abs(len(ray_rows) - len(local_rows)) + min(len(ray_rows), len(local_rows))

    def same(a: object, b: object) -> bool:
        return bool(a == b) or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))

    return sum(1 for got, want in zip(ray_rows, local_rows, strict=True)
               if not all(same(got[c], want[c]) for c in want if c in got))


def main() -> None:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    urls = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000
    if len(sys.argv) > 3 and sys.argv[3] == "--inside":
        result = inside(Path(sys.argv[4]), records, urls)
        Path(sys.argv[4], "bench.json").write_text(json.dumps(result), encoding="utf-8")
        return
    with tempfile.TemporaryDirectory() as tmp:
        done = namespaced([sys.executable, __file__, str(records), str(urls), "--inside", tmp], timeout=7200)
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        result = json.loads(Path(tmp, "bench.json").read_text(encoding="utf-8"))
    n = result["records"]
    print(f"{n} records, {result['urls']} unique URLs on 4 loopback hosts, scorer grounding")
    print(f"single machine          {result['local_s']:8.1f} s  {n / result['local_s']:8.1f} records/s")
    print(f"ray, 2 nodes, cold      {result['ray_s']:8.1f} s  {n / result['ray_s']:8.1f} records/s")
    print(f"ray, page store warm    {result['ray_store_s']:8.1f} s  {n / result['ray_store_s']:8.1f} records/s")
    print(f"ray rows differing from the single-machine rows: {result['differing_rows']} of {n}")
    print(f"ray cold run: {result['urls_requested']} URLs requested, at most {result['most_requests_per_url']} "
          f"request(s) per URL, at most {result['most_in_flight_per_host']} in flight per host (--per-host 2)")


if __name__ == "__main__":
    main()
