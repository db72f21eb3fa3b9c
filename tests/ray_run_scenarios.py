"""`tlmscore.run` on a real Ray cluster, for `tests/test_ray_run.py` (run inside the namespaces).

`python -m tests.ray_run_scenarios WORK` starts a two-node cluster, the fake Batch API and the
fake chat server on loopback, then runs, through the command line: the fixtures (with Batch API
output lines joined to their input file) scored by the judge in Batch API mode with a calibration,
on one machine and on Ray; a live judge with two
settings of `--fetchers` and `--scorer-concurrency`, noting the actor processes each run started
and the judge requests in flight at once; and the library's
`tlmscore.ray.score/prepare/Engine` and `tlmscore.run(engine=...)` as the docs show them.
`WORK/report.json` holds what happened; the test asserts.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import threading
from pathlib import Path
from typing import Any

import pandas as pd

from tests.batch_server import BatchServer
from tests.judge_server import ChatReply, ChatServer, completion
from tests.ray_cluster import ROOT, Cluster

FIXTURES = ROOT / "fixtures"
INPUTS = [str(FIXTURES / n) for n in ("demo.jsonl", "chain_a.jsonl", "chain_b.jsonl", "items.jsonl")]
# Batch API output lines, joined to their requests by --batch-input on both engines
BATCH = [str(FIXTURES / "batch_output.jsonl"), "--batch-input", str(FIXTURES / "batch_input.jsonl")]
# inputs without follow-up calls: the library's calls are shown here, the chain joins in test_ray
PLAIN = [str(FIXTURES / n) for n in ("citations.jsonl", "fidelity.jsonl")]
OFFLINE = ["--offline", "--pages", str(FIXTURES / "pages"), "--quiet"]
FAST_BATCHES = ["--option", "poll_interval=0.05", "--option", "max_poll_interval=0.2"]


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


def _judge_batch(work: Path, cluster: Cluster) -> dict[str, Any]:
    """The must-show run: `--judge-batch --calibration`, one machine then Ray, against one Batch API fake."""
    from tlmscore.cli import main

    _calibration(work / "calib.json")
    report: dict[str, Any] = {}
    with BatchServer(varied_reply) as server:
        judge = ["--scorer", "judge", "--base-url", server.url, "--model", "fake", "--judge-batch",
                 "--calibration", str(work / "calib.json"), *FAST_BATCHES, *OFFLINE]
        report["local"] = main(["score", *INPUTS, *BATCH, "-o", str(work / "jb-local.parquet"),
                                "--cache-dir", str(work / "cache-jl"), *judge])
        report["local_submitted"] = dict(server.submitted)
        server.submitted.clear()
        report["ray"] = main(["score", *INPUTS, *BATCH, "-o", str(work / "jb-ray"), "--engine", "ray",
                              "--address", cluster.address, "--cache-dir", str(work / "cache-jr"), *judge])
        report["ray_submitted"] = dict(server.submitted)
    return report


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
        """The actor processes alive now, by process id."""
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
        # an earlier run's actors may still be exiting: they are not this run's
        self._earlier = set(self._actors())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def count(self, kind: str) -> int:
        """Actor processes whose title names `kind` (the class the actor pool runs)."""
        return sum(1 for title in self.seen.values() if kind in title)


def _knobs(work: Path, cluster: Cluster) -> dict[str, Any]:
    """A live judge (one request at a time per actor) with `--fetchers F --scorer-concurrency S`, for two
    settings: the fetch and scoring actors each run made, and the most judge requests in flight at once."""
    from tlmscore.cli import main

    made: dict[str, Any] = {}
    for fetchers, scorers in ((1, 1), (3, 2)):
        with ChatServer(varied_reply, latency=0.05, hold_first=scorers) as server, ActorProcesses() as actors:
            code = main(["score", *INPUTS, "-o", str(work / f"knobs-{fetchers}-{scorers}"), "--engine", "ray",
                         "--address", cluster.address, "--cache-dir", str(work / f"cache-k{fetchers}"),
                         "--scorer", "judge", "--base-url", server.url, "--model", "fake", "--no-judge-cache",
                         "--option", "concurrency=1", "--fetchers", str(fetchers), "--scorer-concurrency",
                         str(scorers), *OFFLINE])
        made[f"{fetchers}-{scorers}"] = {
            "code": code, "fetch_actors": actors.count("FetchPages"), "score_actors": actors.count("ScoreRows"),
            "titles": sorted(set(actors.seen.values())), "max_in_flight": server.max_in_flight,
            "calls": server.calls}
    return made


def _floats(column: Any) -> list[float | None]:
    """A score column as JSON values: a missing score (NaN, or null read back from Parquet) is None."""
    return [None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
            else float(value) for value in column.astype(object)]


def _library(work: Path, cluster: Cluster) -> dict[str, Any]:
    """`tlmscore.ray.score/prepare/Engine` and `tlmscore.run(..., engine=...)`, called as the docs show them."""
    import ray

    import tlmscore
    from tlmscore import ray as tlm_ray

    settings = tlmscore.Settings(offline=True, page_files=(FIXTURES / "pages",), cache_dir=work / "cache-lib",
                                 progress=False)
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        rows = tlm_ray.score(PLAIN, settings, "grounding",
                             engine=tlm_ray.Engine(page_store=work / "store-lib", fetchers=4))   # a ray.data.Dataset
        scored = rows.to_pandas().sort_values("position")                                # input order
        prepared = tlm_ray.prepare(PLAIN, settings, engine=tlm_ray.Engine(fetchers=1)).to_pandas()
        result = tlmscore.run(PLAIN, work / "lib-run", scorer="grounding", settings=settings,
                              engine=tlm_ray.Engine(scorers=2))
    finally:
        ray.shutdown()
    local = tlmscore.score(PLAIN, "grounding", settings)
    return {"scored_ids": scored["id"].tolist(), "scored": _floats(scored["score"]),
            "prepared_ids": sorted(prepared["id"].tolist()), "local_ids": local["id"].tolist(),
            "local_scored": _floats(local["score"]),
            "run": {"output": str(result.output), "rows": result.rows, "earlier": result.earlier,
                    "total": result.total},
            "store_written": any((work / "store-lib").rglob("*.parquet"))}


def run(work: Path) -> dict[str, Any]:
    """Every scenario, in one cluster; the report of what happened."""
    report: dict[str, Any] = {}
    with Cluster(work / "ray") as cluster:
        report["nodes"] = cluster.nodes
        report["judge_batch"] = _judge_batch(work, cluster)
        report["knobs"] = _knobs(work, cluster)
        report["library"] = _library(work, cluster)
    return report


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    result = run(folder)
    (folder / "report.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
