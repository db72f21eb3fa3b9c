"""A CPU-bound scorer's chunks are scored in worker processes on every core, with the rows of one process."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import tlmscore
from tests.support.paths import FIXTURES
from tests.support.scorers import WhereScorer
from tlmscore import Settings
from tlmscore.pipeline import POOLED_AT_LEAST
from tlmscore.scoring.calibration import Calibrated, fit
from tlmscore.scoring.grounding import GroundingScorer

LABELLED = FIXTURES / "labelled"


def copies(path: Path, count: int) -> Path:
    """`count` records: the labelled fixtures again and again, each with its own id."""
    lines = [json.loads(line) for line in (LABELLED / "labelled.jsonl").read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(json.dumps({**lines[n % len(lines)], "id": f"copy-{n}"}) + "\n" for n in range(count)),
                    encoding="utf-8")
    return path


def settings(workers: int, tmp_path: Path, **more: object) -> Settings:
    return Settings(offline=True, page_files=(LABELLED / "pages",), cache_dir=tmp_path / "cache", progress=False,
                    score_workers=workers, **more)  # type: ignore[arg-type]


def test_grounding_rows_in_worker_processes_equal_one_process_rows(tmp_path: Path) -> None:
    data = copies(tmp_path / "calls.jsonl", 3 * POOLED_AT_LEAST)
    one = tlmscore.score([str(data)], "grounding", settings(1, tmp_path, chunk_size=2 * POOLED_AT_LEAST))
    two = tlmscore.score([str(data)], "grounding", settings(2, tmp_path, chunk_size=2 * POOLED_AT_LEAST))
    assert one["score"].notna().sum() >= POOLED_AT_LEAST  # enough rows were scored for the pool to be used
    assert one.to_json(orient="records", lines=True) == two.to_json(orient="records", lines=True)


def test_a_big_chunk_is_scored_in_the_workers_in_order_and_a_small_one_here(tmp_path: Path) -> None:
    data = copies(tmp_path / "calls.jsonl", 3 * POOLED_AT_LEAST - 1)  # a chunk of 2T rows, then one of T - 1
    frame = tlmscore.score([str(data)], WhereScorer(seconds=1.0), settings(2, tmp_path, chunk_size=2 * POOLED_AT_LEAST))
    assert frame["error"].isna().all()
    pids = [details["pid"] for details in frame["details"]]
    big, small = pids[: 2 * POOLED_AT_LEAST], pids[2 * POOLED_AT_LEAST:]
    assert os.getpid() not in big and len(set(big)) == 2  # the first chunk: two worker processes
    assert set(small) == {os.getpid()}  # the last chunk holds fewer than POOLED_AT_LEAST rows: scored here
    # each row got its own score back, in order: the answer it was scored on is its own
    assert [d["response"] for d in frame["details"]] == list(frame["response"])


@pytest.mark.parametrize(("count", "pooled"), [(POOLED_AT_LEAST - 1, False), (POOLED_AT_LEAST, True)])
def test_the_pool_starts_only_for_a_chunk_of_at_least_its_threshold(tmp_path: Path, count: int,
                                                                     pooled: bool) -> None:
    rows = tlmscore.score([str(copies(tmp_path / "calls.jsonl", count))], WhereScorer(), settings(2, tmp_path))
    assert rows["error"].isna().all()
    pids = {d["pid"] for d in rows["details"]}
    assert (os.getpid() not in pids) if pooled else (pids == {os.getpid()})


def test_one_worker_means_the_runs_own_process(tmp_path: Path) -> None:
    data = copies(tmp_path / "calls.jsonl", 3 * POOLED_AT_LEAST)
    rows = tlmscore.score([str(data)], WhereScorer(), settings(1, tmp_path))
    assert {d["pid"] for d in rows["details"] if d} == {os.getpid()}


def test_a_worker_that_dies_leaves_its_chunk_to_this_process_and_no_row_is_lost(tmp_path: Path) -> None:
    data = copies(tmp_path / "calls.jsonl", 2 * POOLED_AT_LEAST)
    rows = tlmscore.score([str(data)], WhereScorer(die_in_worker=True), settings(2, tmp_path))
    assert len(rows) == 2 * POOLED_AT_LEAST
    scored = rows[rows["error"].isna()]
    assert len(scored) >= POOLED_AT_LEAST and (scored["score"] == 0.5).all()
    assert {d["pid"] for d in scored["details"]} == {os.getpid()}
    assert scoring_processes() == []  # the other worker was stopped too


def scoring_processes() -> list[int]:
    """This process's children that are scoring workers."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and b"tlmscore.pipeline._scoring" in (stat.parent / "cmdline").read_bytes():
                found.append(int(stat.parent.name))
    return found


def test_no_worker_process_outlives_the_run(tmp_path: Path) -> None:
    data = copies(tmp_path / "calls.jsonl", 3 * POOLED_AT_LEAST)
    rows = tlmscore.score([str(data)], WhereScorer(), settings(2, tmp_path))
    assert os.getpid() not in {d["pid"] for d in rows["details"]}  # workers did score
    assert scoring_processes() == []


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    data = copies(tmp_path / "calls.jsonl", 2 * POOLED_AT_LEAST)
    script = tmp_path / "audit.py"
    script.write_text(
        "import os, sys, tlmscore\n"
        f"open({str(tmp_path / 'ran.txt')!r}, 'a').write('ran\\n')\n"
        f"rows = tlmscore.score([{str(data)!r}], 'grounding', tlmscore.Settings(offline=True, score_workers=2,"
        f" page_files=({str(LABELLED / 'pages')!r},), cache_dir={str(tmp_path / 'cache')!r}))\n"
        "print(int(rows['score'].notna().sum()))\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= POOLED_AT_LEAST
    assert (tmp_path / "ran.txt").read_text(encoding="utf-8") == "ran\n"  # the workers never ran the script


def test_grounding_pickles_as_its_options_and_calibration_keeps_it_cpu_bound() -> None:
    scorer = GroundingScorer()
    again = pickle.loads(pickle.dumps(scorer))  # noqa: S301  (our own pickle)
    assert isinstance(again, GroundingScorer) and again.options == scorer.options
    calibrated = Calibrated(scorer, fit([0.1, 0.4, 0.6, 0.9] * 5, [0, 0, 1, 1] * 5, scorer="grounding"))
    assert calibrated.cpu_bound is True
    assert getattr(pickle.loads(pickle.dumps(calibrated)), "cpu_bound", None) is True  # noqa: S301
    assert Calibrated(WhereScorer(), fit([0.1, 0.9] * 10, [0, 1] * 10, scorer="where")).cpu_bound is True


@pytest.mark.parametrize("workers", [0, -1])
def test_score_workers_must_be_at_least_one(workers: int) -> None:
    with pytest.raises(ValueError, match="score_workers"):
        Settings(score_workers=workers)
