"""`tlmscore.run` on a real two-node Ray cluster: every feature of the local run, the same rows.

One module fixture runs `tests/ray_run_scenarios.py` inside new network and PID namespaces (the
fake Batch API and chat server on loopback, every run through the command line or the library as
the docs show it); the tests read what it wrote and what the servers and Ray's state API saw.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.ray_cluster import run_scenarios

pytestmark = pytest.mark.system("ray")  # a cluster in network namespaces: root and the `ray` extra
pads = pytest.importorskip("pyarrow.dataset")

ROWS = 51  # the four fixture inputs, bad lines included, and three Batch API output lines
PLAIN_ROWS = 18  # citations.jsonl and fidelity.jsonl
COMPARED = ("id", "source", "line", "model", "prompt", "response", "error", "response_status", "scorer", "score",
            "explanation", "details", "calibrated_score")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    work = tmp_path_factory.mktemp("ray-run")
    return work, run_scenarios(work, "tests.ray_run_scenarios", timeout=3000)


def _rows(path: Path) -> list[dict[str, Any]]:
    return pads.dataset(str(path), format="parquet").to_table().to_pylist()


def _missing(value: Any) -> bool:
    """No score: null in Parquet, or NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def test_judge_batch_with_calibration_on_ray_gives_the_local_rows(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    assert report["nodes"] == 2
    assert report["judge_batch"]["local"] == 0 and report["judge_batch"]["ray"] == 0
    local = {r["id"]: r for r in _rows(work / "jb-local.parquet")}
    ray_rows = _rows(work / "jb-ray")  # Ray's order is its own: compared by id
    assert len(ray_rows) == len(local) == ROWS
    for got in ray_rows:
        want = local[got["id"]]
        for column in COMPARED:
            assert _same(got[column], want[column]), (column, got["id"], got[column], want[column])
    scored = [r for r in ray_rows if not _missing(r["score"])]
    assert len(scored) > ROWS // 2 and all(r["scorer"] == "judge" for r in scored)
    assert len({r["score"] for r in scored}) > 5, "every row got the same verdict: the lookup was not tested"
    assert all(0.0 <= r["calibrated_score"] <= 1.0 for r in scored)
    assert len({r["calibrated_score"] for r in scored}) > 1
    assert all(_missing(r["calibrated_score"]) for r in ray_rows if _missing(r["score"]))
    batch = [r for r in ray_rows if r["source"].endswith("batch_output.jsonl")]
    joined = [r for r in batch if r["error"] is None]
    assert len(batch) == 3 and len(joined) == 2  # one line is the Batch API's 429: an error row
    asked = ("What is the capital of Portugal?", "Name one prime above 100.")  # the requests, from the input file
    assert sorted(q for q in asked for r in joined if q in r["prompt"]) == sorted(asked)


def test_judge_batch_on_ray_sends_each_request_once_through_batches(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    local, ray = report["judge_batch"]["local_submitted"], report["judge_batch"]["ray_submitted"]
    assert ray and set(ray.values()) == {1}, "a request was submitted twice"
    assert set(ray) == set(local)  # the same requests (same custom_ids: same bodies) as one machine


def test_fetchers_and_scorer_concurrency_set_the_actor_processes_started(
        runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    one, more = report["knobs"]["1-1"], report["knobs"]["3-2"]
    assert one["code"] == 0 and more["code"] == 0
    assert (one["fetch_actors"], one["score_actors"]) == (1, 1), one["titles"]
    assert (more["fetch_actors"], more["score_actors"]) == (3, 2), more["titles"]


def test_scorer_concurrency_bounds_the_judge_requests_in_flight_across_the_cluster(
        runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    one, more = report["knobs"]["1-1"], report["knobs"]["3-2"]
    assert one["calls"] > 0 and one["calls"] == more["calls"]
    assert one["max_in_flight"] == 1  # one actor, one request at a time (concurrency=1)
    assert 1 <= more["max_in_flight"] <= 2


def test_library_ray_score_prepare_and_run_as_the_docs_show_them(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    lib = report["library"]
    assert lib["scored_ids"] == lib["local_ids"]  # sorted by position: input order
    assert lib["scored"] == lib["local_scored"]  # NaN written as None by the scenario
    assert lib["prepared_ids"] == sorted(lib["local_ids"])
    assert lib["store_written"]
    assert lib["run"] == {"output": str(work / "lib-run"), "rows": PLAIN_ROWS, "earlier": 0, "total": PLAIN_ROWS}
    assert sorted(r["id"] for r in _rows(work / "lib-run")) == sorted(lib["local_ids"])
