"""The Ray engine against a real two-node cluster: the single machine's run, rows and summary, made on Ray.

One module fixture runs `tests/servers/ray_scenarios.py` inside new network and PID namespaces (a head node
and a worker node started with `ray start`, page servers on four loopback hosts, the fake Batch API
and chat servers, every run through the command line or the library as the docs show it); the
tests read what it wrote and what the servers and /proc saw.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from tests.servers.ray_cluster import run_scenarios

pytestmark = pytest.mark.system("ray")  # a cluster in network namespaces: root and the `ray` extra
pq = pytest.importorskip("pyarrow.parquet")

RECORDS, URLS = 300, 60  # two generated files, the last gzipped; four hosts
EVERY_FIXTURE_ROWS = 98  # every fixture file's records, bad lines and Batch API output lines included


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    work = tmp_path_factory.mktemp("ray")
    return work, run_scenarios(work, "tests.servers.ray_scenarios", str(RECORDS), str(URLS), timeout=3000)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _summary(err: str, output: Path) -> str:
    """The run summary: what the command line printed from the line counting the records on, OUT named `OUT`."""
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("tlmscore: ") and " records → " in line)
    return "\n".join(lines[start:]).replace(str(output), "OUT")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def test_cluster_has_a_head_and_a_worker_node(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    assert report["nodes"] == 2, report["worker_log"]


def test_every_fixture_gives_the_single_machine_file_and_summary(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    every = report["every_fixture"]
    (local_code, local_err), (ray_code, ray_err) = every["local"], every["ray"]
    assert local_code == ray_code == 0
    local, ray = work / "every-local.jsonl", work / "every-ray.jsonl"
    assert _summary(ray_err, ray) == _summary(local_err, local)  # the same summary, word for word
    assert "Warning" not in ray_err and "INFO" not in ray_err  # --quiet: no log lines of Ray's either
    assert ray.read_bytes() == local.read_bytes()  # the same rows: prompts, responses, scores, errors, warnings
    rows = _lines(ray)
    assert len(rows) == EVERY_FIXTURE_ROWS
    assert any(r["error"] and "invalid JSON" in r["error"] for r in rows)  # bad records stay rows
    assert any(r["source"].endswith("stream.jsonl") and r["error"] is None for r in rows)  # streams read as one
    by_id = {r["id"]: r for r in rows}
    # chain-3 (chain_b.jsonl) continues chain-2 (chain_a.jsonl), which continues chain-1 (chain_b.jsonl):
    # two levels of joins across files bring chain-1's question into chain-3's prompt.
    assert by_id["chain-3-packing"]["history_complete"] is True
    assert "I'm in Lisbon this weekend" in by_id["chain-3-packing"]["prompt"]
    scored = [r for r in rows if r["score"] is not None]
    assert len(scored) > len(rows) // 3 and all(r["scorer"] == "judge" for r in scored)
    assert len({r["score"] for r in scored}) > 5, "every row got the same verdict: the lookup was not tested"
    assert len({r["calibrated_score"] for r in scored}) > 1
    batch = [r for r in rows if r["source"].endswith("batch_output.jsonl")]
    joined = [r for r in batch if r["error"] is None]
    assert len(batch) == 3 and len(joined) == 2  # one line is the Batch API's 429: an error row
    asked = ("What is the capital of Portugal?", "Name one prime above 100.")  # the requests, from the input file
    assert sorted(q for q in asked for r in joined if q in r["prompt"]) == sorted(asked)


def test_the_judge_in_batch_mode_on_ray_sends_each_request_once(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    local, ray = report["every_fixture"]["local_submitted"], report["every_fixture"]["ray_submitted"]
    assert ray and set(ray.values()) == {1}, "a request was submitted twice"
    assert set(ray) == set(local)  # the same requests (same custom_ids: same bodies) as one machine


def test_fetchers_and_scorer_concurrency_set_the_actor_processes_started(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    actors = report["every_fixture"]["actors"]
    assert (actors["fetch"], actors["score"]) == (3, 1), actors["titles"]


def test_scorer_concurrency_bounds_the_judge_requests_in_flight_across_the_cluster(
        runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    live = report["live_judge"]
    assert live["code"] == 0, live["err"]
    assert live["calls"] > 2
    assert 1 <= live["max_in_flight"] <= 2  # two actors, one request at a time each (concurrency=1)


def test_generated_set_gives_the_single_machine_rows(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    generated = report["generated"]
    assert generated["ray"][0] == generated["local"][0] == 0
    assert _summary(generated["ray"][1], work / "gen-ray.parquet") == _summary(generated["local"][1],
                                                                                 work / "gen-local.parquet")
    ray_rows = pq.read_table(work / "gen-ray.parquet").to_pylist()
    local_rows = pq.read_table(work / "gen-local.parquet").to_pylist()
    assert len(ray_rows) == len(local_rows) == RECORDS
    for got, want in zip(ray_rows, local_rows, strict=True):
        for column in want:
            assert _same(got[column], want[column]), (column, got["id"], got[column], want[column])
    assert sum(1 for r in ray_rows if r["error"]) == RECORDS // 100
    assert all(r["n_urls"] == r["n_urls_ok"] for r in ray_rows if not r["error"])


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


def test_killing_a_worker_node_mid_run_still_gives_every_row_once(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    assert report["kill_worker"]["worker_killed"]
    assert report["kill_worker"]["code"][0] == 0
    rows = pq.read_table(work / "kill-worker.parquet").to_pylist()
    want = pq.read_table(work / "gen-local.parquet").to_pylist()
    assert [(r["source"], r["line"], r["prompt"]) for r in rows] == [(r["source"], r["line"], r["prompt"])
                                                                     for r in want]


def test_resume_after_killing_the_driver_gives_every_row_once(runs: tuple[Path, dict[str, Any]]) -> None:
    work, report = runs
    result = report["kill_driver"]
    assert result["ended_before_kill"] is None, result["driver_err"]  # it was running when killed
    assert result["killed_code"] != 0
    assert 0 < result["saved_before_kill"] < RECORDS  # killed mid-run, with rows saved
    assert result["resumed"]["code"] == 0, result["resumed"]["err"]
    said = result["resumed"]["err"]
    earlier = int(re.search(r"resuming: (\d+) records already done", said)[1])  # type: ignore[index]
    assert result["saved_before_kill"] <= earlier < RECORDS  # the rows saved by the kill, and not all
    assert f"{RECORDS} rows in {work / 'kill-driver.jsonl'} ({earlier} from the earlier run)" in said
    rows = _lines(work / "kill-driver.jsonl")
    want = pq.read_table(work / "gen-local.parquet").to_pylist()
    assert [(r["source"], r["line"], r["prompt"]) for r in rows] == [(r["source"], r["line"], r["prompt"])
                                                                     for r in want]


def test_a_resume_whose_settings_changed_is_refused_on_ray_as_on_one_machine(
        runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    changed = report["kill_driver"]["changed"]
    assert changed["code"] == 2
    errors = [line for line in changed["err"].splitlines() if line.startswith("tlmscore: error:")]
    assert len(errors) == 1 and "urls" in errors[0], changed["err"]


def test_page_store_is_read_before_the_network(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    assert report["kill_driver"]["again"]["code"] == 0, report["kill_driver"]["again"]["err"]
    assert report["kill_driver"]["again_requests"] == 0


def test_library_ray_score_as_the_docs_show_it(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    lib = report["library"]
    assert lib["scored_ids"] == lib["local_ids"]  # sorted by position: input order
    assert lib["scored"] == lib["local_scored"]  # NaN written as None by the scenario
    assert lib["store_written"]


def test_pages_joined_to_their_records_give_the_rows_of_pages_handed_whole(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    lib = report["library"]
    assert (lib["joined_ids"], lib["joined"]) == (lib["local_ids"], lib["local_scored"])
    handed_whole, joined, local = lib["prompts"]
    assert handed_whole == joined == local
    assert any("直是世界最高的建筑物" in p for p in local)  # a saved page's text (fixtures/pages) was rendered


def test_the_engine_sizes_its_own_blocks_and_leaves_the_hosts_setting_alone(runs: tuple[Path, dict[str, Any]]) -> None:
    _, report = runs
    engine_size, small = report["library"]["blocks"]
    assert engine_size <= 2  # 18 records' rows of 2 files: a block per file at most, far under the engine's 16 MB
    assert small > engine_size  # 4 KB blocks: the size reached every dataset the rows were made through
    before, after = report["library"]["host_context"]
    assert before == after == [128 << 20, None, False]  # Ray's own defaults, in the process that ran the engine


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
