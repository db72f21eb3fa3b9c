"""The Ray engine's runs against a real cluster, for `tests/test_ray.py` (run inside the namespaces).

`python -m tests.ray_scenarios WORK RECORDS URLS` starts the page servers and a two-node cluster,
then runs each scenario through the command line, the single-machine run next to the Ray run,
and writes `WORK/report.json` (what the servers saw, what each run returned) beside the outputs.
The test reads them and asserts; this script only runs things and records what happened.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.ray_cluster import BIN, ROOT, Cluster, PageServers, generate
from tlmscore.cli import main

FIXTURES = ROOT / "fixtures"
FIXTURE_INPUTS = [str(FIXTURES / n) for n in ("demo.jsonl", "chain_a.jsonl", "chain_b.jsonl", "items.jsonl")]
_WAIT = 600.0


def _fixtures(work: Path, cluster: Cluster) -> dict[str, Any]:
    """Bundled fixtures, scored offline with their saved pages: Ray and one machine."""
    common = ["--offline", "--pages", str(FIXTURES / "pages"), "--quiet"]
    local = main(["score", *FIXTURE_INPUTS, "-o", str(work / "fixtures-local.parquet"),
                  "--cache-dir", str(work / "cache-fl"), *common])
    ray = main(["score", *FIXTURE_INPUTS, "-o", str(work / "fixtures-ray"), "--engine", "ray",
                "--address", cluster.address, "--cache-dir", str(work / "cache-fr"), *common])
    return {"local": local, "ray": ray}


def _web(servers: PageServers) -> list[str]:
    return [flag for name in servers.names for flag in ("--allow-host", name)] + ["--per-host", "2", "--quiet"]


def _generated(work: Path, cluster: Cluster, servers: PageServers, inputs: list[str]) -> dict[str, Any]:
    """The generated set from the page servers: Ray first (counted), then one machine."""
    servers.reset()
    ray = main(["score", *inputs, "-o", str(work / "gen-ray"), "--engine", "ray", "--address", cluster.address,
                "--cache-dir", str(work / "cache-gr"), "--page-store", str(work / "store-gr"), *_web(servers)])
    seen_ray = servers.reset()
    local = main(["score", *inputs, "-o", str(work / "gen-local.parquet"), "--cache-dir", str(work / "cache-gl"),
                  *_web(servers)])
    return {"ray": ray, "local": local, "seen_ray": seen_ray, "seen_local": servers.reset()}


def _when_fetching(servers: PageServers, then: Any) -> threading.Thread:
    """Call `then()` as soon as the first page request arrives (or after the bounded wait)."""
    def watch() -> None:
        deadline = time.monotonic() + _WAIT
        while servers.requests() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        then()

    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def _kill_worker(work: Path, cluster: Cluster, servers: PageServers, inputs: list[str]) -> dict[str, Any]:
    """Kill the worker node while pages are being fetched; the run must still end with every row."""
    servers.reset()
    watcher = _when_fetching(servers, cluster.kill_worker)
    code = main(["prepare", *inputs, "-o", str(work / "kill-worker"), "--engine", "ray", "--address",
                 cluster.address, "--cache-dir", str(work / "cache-kw"), "--page-store", str(work / "store-kw"),
                 *_web(servers)])
    watcher.join(timeout=_WAIT)
    servers.reset()
    killed = cluster.worker is not None and cluster.worker.poll() is not None
    cluster.start_worker()
    return {"code": code, "worker_killed": killed, "nodes_after_restart": cluster.nodes}


def _cli(inputs: list[str], out: Path, cluster: Cluster, servers: PageServers, work: Path, *more: str) -> list[str]:
    return [str(BIN / "python"), "-m", "tlmscore", "prepare", *inputs, "-o", str(out), "--engine", "ray",
            "--address", cluster.address, "--cache-dir", str(work / "cache-kd"), "--page-store",
            str(work / "store-kd"), *_web(servers), *more]


def _kill_driver(work: Path, cluster: Cluster, servers: PageServers, inputs: list[str]) -> dict[str, Any]:
    """Kill the driver (the `tlmscore` process) mid-run, then `--resume`; then lose one part and resume again.

    The last run finds every page in the page store the earlier ones wrote: it requests none.
    """
    out = work / "kill-driver"
    servers.reset()
    driver = subprocess.Popen(_cli(inputs, out, cluster, servers, work), cwd=ROOT, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watcher = _when_fetching(servers, lambda: os.killpg(driver.pid, signal.SIGKILL))
    killed_code = driver.wait(timeout=_WAIT)
    watcher.join(timeout=_WAIT)
    resumed = subprocess.run(_cli(inputs, out, cluster, servers, work, "--resume"), cwd=ROOT, timeout=_WAIT,
                             capture_output=True, text=True, check=False)
    kept = {p.name: sorted(f.stat().st_mtime_ns for f in p.iterdir()) for p in out.glob("part-*")}
    shutil.rmtree(out / "part-00001")
    servers.reset()
    again = subprocess.run(_cli(inputs, out, cluster, servers, work, "--resume"), cwd=ROOT, timeout=_WAIT,
                           capture_output=True, text=True, check=False)
    after = {p.name: sorted(f.stat().st_mtime_ns for f in p.iterdir()) for p in out.glob("part-*")}
    return {"killed_code": killed_code, "resume_code": resumed.returncode, "resume_err": resumed.stderr[-2000:],
            "again_code": again.returncode, "again_err": again.stderr[-2000:],
            "part0_untouched": kept.get("part-00000") == after.get("part-00000"), "parts": sorted(after),
            "again_requests": servers.requests()}


def _empty_first_block(cluster: Cluster) -> dict[str, Any]:
    """`_joins_of_empty_blocks` on the cluster (connected for it only, as each run connects on its own)."""
    import ray

    ray.init(address=cluster.address, log_to_driver=False)
    try:
        return _joins_of_empty_blocks()
    finally:
        ray.shutdown()


def _joins_of_empty_blocks() -> dict[str, Any]:
    """Joins and group-bys whose (left) side starts with an empty block without columns, as chained maps make one.

    The first input block maps to no row, so the second map is not called on it and Ray passes it
    on without columns. Blocks come in the order their tasks end; the left side is put together
    with that block first, the order in which Ray's own join and group-by fail (run too, to show they do).
    """
    import pyarrow as pa
    import ray.data

    from tlmscore.engines import flat_rows, grouped, join_on_key, schema

    keyed = schema(key="string", owner="int64")
    numbers = ray.data.from_items([{"n": n} for n in range(3)], override_num_blocks=3)
    first = flat_rows(numbers, lambda r: [{"key": f"k{r['n']}", "owner": r["n"]}] if r["n"] else [], keyed)
    blocks = [ref for bundle in flat_rows(first, lambda r: [r], keyed).materialize().iter_internal_ref_bundles()
              for ref in bundle.block_refs]
    columns = {ref: ray.get(ref).num_columns for ref in blocks}
    left = ray.data.from_arrow_refs(sorted(blocks, key=lambda ref: columns[ref] > 0))
    right = ray.data.from_items([{"key": f"k{n}", "value": n} for n in range(3)])
    more = ray.data.from_items([{"key": "k1", "owner": 9}])

    def sizes(group: pa.Table) -> pa.Table:
        return pa.table({"key": [group["key"][0]], "rows": [len(group)]})

    def ray_own(run: Any) -> str:
        try:
            run()
        except Exception as error:  # noqa: BLE001  (what Ray raised, for the report)
            return type(error).__name__
        return "done"

    plain = ray_own(lambda: left.join(right, join_type="inner", num_partitions=4, on=("key",)).take_all())
    plain_groups = ray_own(lambda: left.union(more).groupby("key", num_partitions=4).map_groups(
        sizes, batch_format="pyarrow").take_all())
    groups = grouped(left.union(more), "key", 4).map_groups(sizes, batch_format="pyarrow").take_all()
    joined = join_on_key(left, right, "inner", 4).take_all()
    anti = join_on_key(left, right.filter(lambda r: r["value"] == 1), "left_anti", 4).take_all()
    nothing = flat_rows(flat_rows(numbers, lambda r: [], keyed), lambda r: [r], keyed)
    return {"block_columns": sorted(columns.values()), "plain_join": plain, "plain_groupby": plain_groups,
            "groups": sorted((r["key"], r["rows"]) for r in groups),
            "joined": sorted((r["key"], r["owner"], r["value"]) for r in joined),
            "anti": sorted(r["key"] for r in anti),
            "nothing_joined": join_on_key(nothing, right, "inner", 4).count()}


def run(work: Path, records: int, urls: int) -> dict[str, Any]:
    """Every scenario, in one cluster; the report of what happened."""
    report: dict[str, Any] = {}
    with PageServers(hosts=4) as servers, Cluster(work / "ray") as cluster:
        report["nodes"] = cluster.nodes
        report["empty_first_block"] = _empty_first_block(cluster)
        inputs = generate(work / "gen", records, urls, servers.names)
        report["inputs"] = inputs
        report["fixtures"] = _fixtures(work, cluster)
        report["generated"] = _generated(work, cluster, servers, inputs)
        report["kill_worker"] = _kill_worker(work, cluster, servers, inputs)
        report["kill_driver"] = _kill_driver(work, cluster, servers, inputs)
    return report


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    result = run(folder, int(sys.argv[2]), int(sys.argv[3]))
    (folder / "report.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
