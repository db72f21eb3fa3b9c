"""`tlmscore watch` against a real `mlflow server` while `mlflow.openai.autolog()` sends it calls.

The watcher is killed (SIGKILL) at random points of a live feed ten times and started again; after
the feed every LLM span in the sample holds exactly one feedback of the watch's evaluator identity
(its assessment source), none outside it; a second watcher with the same rate scores the same spans.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import tlmscore
from tests.servers.mlflow_server import (
    MlflowProcess,
    mlflow_process,  # noqa: F401  (the fixture `server`: a server of this module's)
)
from tests.support.paths import ROOT
from tlmscore.watch import evaluator_of, load_state, sample_key, sampled

pytest.importorskip("mlflow", reason="MLflow is not installed: pip install -e '.[dev]'")

LABELLED = ROOT / "fixtures" / "labelled" / "labelled.jsonl"
EXPERIMENT = "watch-kills"
RATE = 0.5
CYCLES = 10
FEEDS, PER_FEED = 3, 20


def _requests(answers: Path) -> list[dict[str, Any]]:
    calls = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    for call in calls:
        (answers / f"{call['id']}.json").write_text(json.dumps(call["response"]), encoding="utf-8")
    return [{**call["request"], "model": call["id"]} for call in calls]


def _spans(server: MlflowProcess) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every LLM span of the experiment, (trace id, span id) → the feedback of `tlmscore.grounding` on it."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for read in tlmscore.read_transcripts(f"{server.address}/{EXPERIMENT}"):
        assert read.trace_id and read.span_id
        found[read.trace_id, read.span_id] = []
    traces = sorted({trace for trace, _ in found})
    for start in range(0, len(traces), 50):
        reply = httpx.get(f"{server.url}/api/3.0/mlflow/traces/batchGet",
                          params={"trace_ids": traces[start:start + 50]}, timeout=60)
        for trace in reply.json()["traces"]:
            for item in trace["trace_info"].get("assessments") or []:
                if item["assessment_name"] == "tlmscore.grounding":
                    found[item["trace_id"], item["span_id"]].append(item)
    return found


def _watcher(address: str, state: Path, cache: Path, *more: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tlmscore", "watch", address, "--state", str(state), "--cache-dir", str(cache),
               "--offline", "--poll", "0.3", "--late", "30", "--sample", str(RATE), *more]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_ten_kills_during_a_live_feed_leave_one_feedback_per_sampled_span_and_identity(
        server: MlflowProcess, tmp_path: Path) -> None:
    address = f"{server.address}/{EXPERIMENT}"
    requests = _requests(tmp_path)
    state, cache = tmp_path / "watch.json", tmp_path / "cache"

    def feed() -> None:
        for n in range(FEEDS):
            server.feed(EXPERIMENT, tmp_path, [requests[(n * PER_FEED + i) % len(requests)] for i in range(PER_FEED)],
                        ROOT)

    feeding = threading.Thread(target=feed)
    feeding.start()
    chance = random.Random(7)  # noqa: S311  (where the kills land, the same on every run)
    for _ in range(CYCLES):
        running = _watcher(address, state, cache)
        time.sleep(chance.uniform(2.5, 6.0))
        running.send_signal(signal.SIGKILL)
        running.wait()
    feeding.join()
    done = _watcher(address, state, cache, "--until-idle")
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err

    identity = evaluator_of("grounding", {}, tlmscore.Settings(offline=True)).id
    spans = _spans(server)
    assert len(spans) == FEEDS * PER_FEED
    expected = sorted(key for key in spans if sampled(sample_key({"trace_id": key[0]}), RATE))
    assert 0 < len(expected) < len(spans)
    mine = sorted(key for key, items in spans.items() for item in items if item["source"]["source_id"] == identity)
    assert mine == expected  # none lost, none doubled, none outside the sample
    first = next(item for items in spans.values() for item in items)
    assert first["source"] == {"source_type": "CODE", "source_id": identity}
    assert first["metadata"]["evaluator.scorer"] == "grounding"
    assert first["metadata"]["evaluator.version"] == tlmscore.__version__
    assert load_state(state).evaluator == identity

    second = _watcher(address, tmp_path / "second.json", cache, "--until-idle", "--threshold", "0.6", "--rescore")
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    other = evaluator_of("grounding", {}, tlmscore.Settings(offline=True), 0.6).id
    spans = _spans(server)
    assert sorted(key for key, items in spans.items() for item in items
                  if item["source"]["source_id"] == other) == expected
    assert all(len(items) in (0, 2) for items in spans.values())
