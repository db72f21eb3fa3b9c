"""The Ray engine against a real two-node cluster: the same rows as one machine, each page fetched once.

One module fixture runs `tests/ray_scenarios.py` inside new network and PID namespaces (a head
node and a worker node started with `ray start`, page servers on four loopback hosts, every run
through the command line); the tests read what it wrote and what the servers counted.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.ray_cluster import run_scenarios

pytestmark = pytest.mark.system("ray")  # a cluster in network namespaces: root and the `ray` extra
pa = pytest.importorskip("pyarrow")
pads = pytest.importorskip("pyarrow.dataset")
pq = pytest.importorskip("pyarrow.parquet")

# Smaller than the benchmark's 20,000 records and 2,000 URLs, to keep CI within its time.
RECORDS, URLS = 1000, 200
CHECKED = ("id", "source", "line", "model", "response_id", "prompt", "response", "n_tool_calls", "n_urls",
           "n_urls_ok", "n_urls_failed", "warnings", "error", "history_complete", "response_status")
SCORED = ("scorer", "score", "explanation", "details")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    work = tmp_path_factory.mktemp("ray")
    return work, run_scenarios(work, "tests.ray_scenarios", str(RECORDS), str(URLS), timeout=1500)


def _rows(path: Path) -> list[dict[str, Any]]:
    table = pads.dataset(str(path), format="parquet").to_table()
    if "position" in table.column_names:
        table = table.sort_by("position")
    return table.to_pylist()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _assert_same_rows(ray_out: Path, local_out: Path, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    ray_rows, local_rows = _rows(ray_out), _rows(local_out)
    assert len(ray_rows) == len(local_rows)
    for got, want in zip(ray_rows, local_rows, strict=True):
        for column in columns:
            assert _same(got[column], want[column]), (column, got["id"], got[column], want[column])
    return ray_rows


def test_cluster_has_a_head_and_a_worker_node(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    assert report["nodes"] == 2


def test_joins_and_groups_leave_out_empty_blocks_that_ray_passes_on_without_columns(
        runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    case = report["empty_first_block"]
    assert case["block_columns"] == [0, 2, 2]  # one block of no rows has no columns either
    assert case["plain_join"] != "done" and case["plain_groupby"] != "done"  # Ray's own fail on it
    assert case["groups"] == [["k1", 2], ["k2", 1]]
    assert case["joined"] == [["k1", 1, 1], ["k2", 2, 2]]
    assert case["anti"] == ["k2"]
    assert case["nothing_joined"] == 0


def test_fixtures_give_the_single_machine_rows(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    assert report["fixtures"] == {"local": 0, "ray": 0}
    rows = _assert_same_rows(work / "fixtures-ray", work / "fixtures-local.parquet", CHECKED + SCORED)
    assert any(r["error"] and "invalid JSON" in r["error"] for r in rows)  # bad records stay rows
    by_id = {r["id"]: r for r in rows}
    # chain-3 (chain_b.jsonl) continues chain-2 (chain_a.jsonl), which continues chain-1 (chain_b.jsonl):
    # two levels of joins across files bring chain-1's question into chain-3's prompt.
    assert by_id["chain-3-packing"]["history_complete"] is True
    assert "I'm in Lisbon this weekend" in by_id["chain-3-packing"]["prompt"]
    positions = [r["position"] for r in rows]
    assert positions == sorted(set(positions))


def test_generated_set_gives_the_single_machine_rows(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    assert report["generated"]["ray"] == 0
    rows = _assert_same_rows(work / "gen-ray", work / "gen-local.parquet", CHECKED + SCORED)
    assert len(rows) == RECORDS
    assert sum(1 for r in rows if r["error"]) == RECORDS // 500
    assert all(r["n_urls"] == r["n_urls_ok"] for r in rows if not r["error"])
    assert not any(r["error"] for r in rows if r["response_id"])


def test_each_unique_url_is_requested_once_across_the_cluster(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    seen = report["generated"]["seen_ray"]
    counts = [n for host in seen.values() for n in host["counts"].values()]
    assert len(counts) == URLS
    assert set(counts) == {1}


def test_per_host_limit_holds_cluster_wide(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    peaks = [host["max_in_flight"] for host in report["generated"]["seen_ray"].values()]
    assert max(peaks) <= 2
    assert len(peaks) == 4


def test_page_store_is_read_before_the_network(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    assert report["kill_driver"]["again_code"] == 0
    assert report["kill_driver"]["again_requests"] == 0


def test_killing_a_worker_node_mid_run_still_gives_every_row_once(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    assert report["kill_worker"]["worker_killed"]
    assert report["kill_worker"]["code"] == 0
    rows = _rows(work / "kill-worker")
    assert sorted((r["source"], r["line"]) for r in rows) == sorted(
        (r["source"], r["line"]) for r in _rows(work / "gen-local.parquet"))
    assert [r["prompt"] for r in rows] == [r["prompt"] for r in _rows(work / "gen-local.parquet")]


def test_resume_after_killing_the_driver_gives_every_row_once(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    result = report["kill_driver"]
    assert result["killed_code"] != 0
    assert result["resume_code"] == 0, result["resume_err"]
    assert result["again_code"] == 0, result["again_err"]
    assert "1 of 2 inputs were already done" in result["again_err"]
    assert result["part0_untouched"]
    assert result["parts"] == ["part-00000", "part-00001"]
    rows = _rows(work / "kill-driver")
    want = _rows(work / "gen-local.parquet")
    assert [(r["source"], r["line"], r["prompt"]) for r in rows] == [
        (r["source"], r["line"], r["prompt"]) for r in want]
