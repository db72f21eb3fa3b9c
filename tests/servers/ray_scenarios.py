"""The Ray engine's runs against a real two-node cluster, for `tests/ray/test_cluster.py` (run inside the namespaces).

`python -m tests.servers.ray_scenarios WORK RECORDS URLS` starts page servers on four loopback hosts, the fake
Batch API and chat servers and a two-node cluster, then runs each scenario through the command line
(or the library, as the docs show it), the single-machine run next to the Ray run, and writes
`WORK/report.json`: what each run returned and printed, what the servers and /proc saw. The test reads
it and the outputs, and asserts; this script only runs things and records what happened.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.servers.batch_server import BatchServer
from tests.servers.judge_server import ChatReply, ChatServer, completion
from tests.servers.ray_cluster import BIN, ROOT, Cluster, PageServers, generate
from tlmscore.cli import main

FIXTURES = ROOT / "fixtures"
# every fixture file, the Batch API output lines joined to their requests by --batch-input
EVERY_FIXTURE = [*(str(FIXTURES / n) for n in ("demo.jsonl", "chain_a.jsonl", "chain_b.jsonl", "items.jsonl",
                                                 "citations.jsonl", "fidelity.jsonl", "phase.jsonl",
                                                 "stream.jsonl", "batch_output.jsonl", "labelled/labelled.jsonl")),
                 "--batch-input", str(FIXTURES / "batch_input.jsonl")]
OFFLINE = ["--offline", "--pages", str(FIXTURES / "pages"), "--pages", str(FIXTURES / "labelled" / "pages"),
           "--quiet"]
PLAIN = [str(FIXTURES / n) for n in ("citations.jsonl", "fidelity.jsonl")]
FAST_BATCHES = ["--option", "poll_interval=0.05", "--option", "max_poll_interval=0.2"]
_WAIT = 600.0


def _main(argv: list[str]) -> tuple[int, str]:
    """The command line's exit code and what it printed on stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def varied_reply(body: dict[str, Any], n: int) -> ChatReply:
    """A rating whose probabilities follow the request's text, so each row gets a score of its own."""
    if len(body.get("messages") or []) == 1:
        return ChatReply(body=completion("The answer is 4."))
    text = json.dumps(body.get("messages"), sort_keys=True).encode()
    spread = int(hashlib.sha256(text).hexdigest()[:4], 16) / 0xFFFF  # 0..1, the same for the same prompt
    return ChatReply(body=completion("A", [("A", -0.05 - 2.0 * spread), ("B", -1.0), ("C", -2.5)]))


def _calibration(path: Path) -> None:
    from tlmscore.scoring import calibration

    fitted = calibration.fit([0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95], [0, 0, 1, 0, 1, 1, 1], scorer="judge")
    calibration.save(fitted, path)


class ActorProcesses:
    """The Ray actor processes seen while a run goes on: every process's title polled from /proc.

    Ray titles an actor's worker process `ray::` and the actor's name (for an actor pool of Ray
    Data, `MapWorker(MapBatches(FetchPages))` and the like); each actor has a process of its own,
    alive for its whole stage, so polling sees every one. The PID namespace holds only this cluster.
    """

    def __init__(self) -> None:
        self.seen: dict[int, str] = {}
        self._earlier: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    @staticmethod
    def _actors() -> dict[int, str]:
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if title.startswith("ray::") and "MapWorker" in title:
                found[int(entry.name)] = title
        return found

    def _poll(self) -> None:
        while not self._stop.is_set():
            for pid, title in self._actors().items():
                if pid not in self._earlier:
                    self.seen.setdefault(pid, title)
            self._stop.wait(0.1)

    def __enter__(self) -> ActorProcesses:
        self._earlier = set(self._actors())  # an earlier run's actors may still be exiting: not this run's
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def count(self, kind: str) -> int:
        """Actor processes whose title names `kind` (the class the actor pool runs)."""
        return sum(1 for title in self.seen.values() if kind in title)


def _every_fixture(work: Path, cluster: Cluster) -> dict[str, Any]:
    """Every fixture scored by the judge in Batch API mode with a calibration: one machine, then Ray.

    The Ray run sets `--fetchers 3 --scorer-concurrency 1`; the actor processes it starts are counted.
    """
    _calibration(work / "calib.json")
    report: dict[str, Any] = {}
    with BatchServer(varied_reply) as server:
        judge = ["--scorer", "judge", "--base-url", server.url, "--model", "fake", "--judge-batch",
                 "--calibration", str(work / "calib.json"), *FAST_BATCHES, *OFFLINE]
        report["local"] = _main(["score", *EVERY_FIXTURE, "-o", str(work / "every-local.jsonl"),
                                 "--cache-dir", str(work / "cache-el"), *judge])
        report["local_submitted"] = dict(server.submitted)
        server.submitted.clear()
        with ActorProcesses() as actors:
            report["ray"] = _main(["score", *EVERY_FIXTURE, "-o", str(work / "every-ray.jsonl"), "--engine", "ray",
                                   "--address", cluster.address, "--cache-dir", str(work / "cache-er"),
                                   "--fetchers", "3", "--scorer-concurrency", "1", *judge])
        report["ray_submitted"] = dict(server.submitted)
        report["actors"] = {"fetch": actors.count("FetchPages"), "score": actors.count("ScoreRows"),
                            "titles": sorted(set(actors.seen.values()))}
    return report


def _live_judge(work: Path, cluster: Cluster) -> dict[str, Any]:
    """A live judge (one request at a time per actor) on two scoring actors: the most requests in flight at once."""
    with ChatServer(varied_reply, latency=0.05, hold_first=2) as server:
        code, err = _main(["score", *PLAIN, "-o", str(work / "live.jsonl"), "--engine", "ray", "--address",
                           cluster.address, "--cache-dir", str(work / "cache-live"), "--scorer", "judge",
                           "--base-url", server.url, "--model", "fake", "--no-judge-cache", "--option",
                           "concurrency=1", "--scorer-concurrency", "2", *OFFLINE])
    return {"code": code, "err": err[-2000:], "calls": server.calls, "max_in_flight": server.max_in_flight}


def _web(servers: PageServers) -> list[str]:
    return [flag for name in servers.names for flag in ("--allow-host", name)] + ["--per-host", "2", "--quiet"]


def _generated(work: Path, cluster: Cluster, servers: PageServers, inputs: list[str]) -> dict[str, Any]:
    """The generated set from the page servers: Ray first (counted, into a page store), then one machine."""
    servers.reset()
    ray = _main(["score", *inputs, "-o", str(work / "gen-ray.parquet"), "--engine", "ray", "--address",
                 cluster.address, "--cache-dir", str(work / "cache-gr"), "--page-store", str(work / "store-gr"),
                 *_web(servers)])
    seen_ray = servers.reset()
    local = _main(["score", *inputs, "-o", str(work / "gen-local.parquet"), "--cache-dir", str(work / "cache-gl"),
                   *_web(servers)])
    servers.reset()
    return {"ray": ray, "local": local, "seen_ray": seen_ray}


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
    """Kill the worker node while pages are being fetched; the run must still end with every row once."""
    servers.reset()
    watcher = _when_fetching(servers, cluster.kill_worker)
    code = _main(["prepare", *inputs, "-o", str(work / "kill-worker.parquet"), "--engine", "ray", "--address",
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


def _run(argv: list[str]) -> dict[str, Any]:
    done = subprocess.run(argv, cwd=ROOT, timeout=_WAIT, capture_output=True, text=True, check=False)
    return {"code": done.returncode, "err": done.stderr[-3000:]}


def _kill_driver(work: Path, cluster: Cluster, servers: PageServers, inputs: list[str]) -> dict[str, Any]:
    """Kill the driver (the `tlmscore` process) once rows are saved, then `--resume`; a changed setting is refused.

    Chunks of one record: the engine hands rows over after the cluster's sort, and a checkpoint write
    a row keeps the writing long enough for the kill to land when the checkpoint holds some of them
    (with chunks of 50, the whole output could be written between two looks). A last run into a new
    output finds every page in the page store the earlier ones wrote, and requests none.
    """
    out = work / "kill-driver.jsonl"
    partial = out.with_name(out.name + ".partial.jsonl")
    servers.reset()
    said = work / "kill-driver.err"
    with said.open("wb") as sink:
        driver = subprocess.Popen(_cli(inputs, out, cluster, servers, work, "--chunk-size", "1"), cwd=ROOT,
                                  start_new_session=True, stdout=subprocess.DEVNULL, stderr=sink)
    deadline = time.monotonic() + _WAIT
    while driver.poll() is None and time.monotonic() < deadline and (
            not partial.is_file() or partial.stat().st_size == 0):
        time.sleep(0.05)
    saved = sum(1 for _ in partial.open(encoding="utf-8")) if partial.is_file() else 0
    ended = driver.poll()  # a driver that ended on its own before the kill: the report says how
    if ended is None:
        os.killpg(driver.pid, signal.SIGKILL)
    killed_code = driver.wait(timeout=_WAIT)
    changed = _run(_cli(inputs, out, cluster, servers, work, "--chunk-size", "1", "--resume", "--urls", "all"))
    resumed = _run(_cli(inputs, out, cluster, servers, work, "--chunk-size", "1", "--resume"))
    servers.reset()
    again = _run(_cli(inputs, work / "from-store.jsonl", cluster, servers, work))
    return {"killed_code": killed_code, "ended_before_kill": ended,
            "driver_err": said.read_text(encoding="utf-8", errors="replace")[-3000:],
            "saved_before_kill": saved, "changed": changed, "resumed": resumed,
            "again": again, "again_requests": servers.requests()}


def _floats(column: Any) -> list[float | None]:
    """A score column as JSON values: a missing score (NaN, or null read back from Parquet) is None."""
    import pandas as pd

    return [None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
            else float(value) for value in column.astype(object)]


def _library(work: Path, cluster: Cluster) -> dict[str, Any]:
    """`tlmscore.ray.score`, called as the docs show it (the command line runs `tlmscore.run(..., engine=...)`).

    Also the rows of `prepare` in blocks of the engine's size and of 4 KB, and the settings the
    engine gives its datasets in Ray's process-wide context, before and after.
    """
    import ray
    import ray.data

    import tlmscore
    from tlmscore import ray as tlm_ray
    from tlmscore.ray._tables import context_of

    settings = tlmscore.Settings(offline=True, page_files=(FIXTURES / "pages",), cache_dir=work / "cache-lib",
                                 progress=False)
    def host() -> list[Any]:  # the settings the engine gives its datasets, in the host's own context (left as is)
        return list(context_of(ray.data.DataContext.get_current()).values())

    host_before = host()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        rows = tlm_ray.score(PLAIN, "grounding", settings,
                             engine=tlm_ray.Engine(page_store=work / "store-lib", fetchers=4))   # a ray.data.Dataset
        scored = rows.to_pandas().sort_values("position")                                # input order
        joined = tlm_ray.score(PLAIN, "grounding", settings, engine=tlm_ray.Engine(broadcast_bytes=0))
        joined_rows = joined.to_pandas().sort_values("position")     # pages joined to their records, not handed whole
        blocks = {size: tlm_ray.prepare(PLAIN, settings, engine=tlm_ray.Engine(block_bytes=size)).materialize()
                  .num_blocks() for size in (tlm_ray.Engine().block_bytes, 4096)}
    finally:
        ray.shutdown()
    local = tlmscore.score(PLAIN, "grounding", settings)
    return {"scored_ids": scored["id"].tolist(), "scored": _floats(scored["score"]),
            "joined_ids": joined_rows["id"].tolist(), "joined": _floats(joined_rows["score"]),
            "prompts": [[p if isinstance(p, str) else None for p in rows["prompt"]]
                        for rows in (scored, joined_rows, local)],
            "local_ids": local["id"].tolist(), "local_scored": _floats(local["score"]),
            "store_written": any((work / "store-lib").rglob("*.parquet")),
            "blocks": list(blocks.values()), "host_context": [host_before, host()]}


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

    from tlmscore.ray import flat_rows, grouped, join_on_key, schema

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


def _timed(report: dict[str, Any], name: str, step: Any) -> None:
    started = time.monotonic()
    report[name] = step()
    report.setdefault("seconds", {})[name] = round(time.monotonic() - started, 1)


def run(work: Path, records: int, urls: int) -> dict[str, Any]:
    """Every scenario, in one cluster; the report of what happened (and how long each took)."""
    report: dict[str, Any] = {}
    with PageServers(hosts=4) as servers, Cluster(work / "ray") as cluster:
        report["nodes"], report["worker_log"] = cluster.nodes, cluster.worker_log
        inputs = generate(work / "gen", records, urls, servers.names)
        report["inputs"] = inputs
        _timed(report, "empty_first_block", lambda: _empty_first_block(cluster))
        _timed(report, "every_fixture", lambda: _every_fixture(work, cluster))
        _timed(report, "live_judge", lambda: _live_judge(work, cluster))
        _timed(report, "generated", lambda: _generated(work, cluster, servers, inputs))
        _timed(report, "kill_worker", lambda: _kill_worker(work, cluster, servers, inputs))
        _timed(report, "kill_driver", lambda: _kill_driver(work, cluster, servers, inputs))
        _timed(report, "library", lambda: _library(work, cluster))
        report["worker_starts"] = cluster.starts
    return report


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    result = run(folder, int(sys.argv[2]), int(sys.argv[3]))
    (folder / "report.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
