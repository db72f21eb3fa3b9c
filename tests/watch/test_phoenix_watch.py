"""`tlmscore watch` against a real `phoenix serve` while the OpenInference instrumentation sends it calls.

The watcher is killed (SIGKILL) at random points of a live feed ten times and started again; after
the feed, every span in the sample holds exactly one annotation of the watch's evaluator identity,
and no span outside it holds one. A second watcher with the same rate (another identity) annotates
the same spans; a higher rate scores the new calls only; the store stopped for a while is waited
for, the cursor kept; the spend cap holds to the request against a fake judge counting requests.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import tlmscore
from tests.servers.judge_server import ChatReply, ChatServer, completion
from tests.servers.openai_server import OpenAIServer
from tests.servers.phoenix_server import (
    PhoenixProcess,
    phoenix_process,  # noqa: F401  (the fixture `phoenix`: a server of this module's)
    send_spans,
    wait_for_spans,
)
from tests.support.paths import ROOT
from tlmscore.watch import Hooks, evaluator_of, load_state, parse_time, sample_key, sampled, watch

pytest.importorskip("phoenix.server.main", reason="the Phoenix server is not installed: pip install -e '.[dev]'")
pytest.importorskip("openinference.instrumentation.openai", reason="the OpenInference instrumentation is not installed")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LABELLED = ROOT / "fixtures" / "labelled" / "labelled.jsonl"
RATE = 0.5
CYCLES = 10


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OpenAIServer, list[dict[str, Any]]]]:
    """The fake OpenAI API answering each labelled call (the request's model names its answer)."""
    folder = tmp_path_factory.mktemp("answers")
    calls = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    for call in calls:
        (folder / f"{call['id']}.json").write_text(json.dumps(call["response"]), encoding="utf-8")
    with OpenAIServer(folder) as server:
        yield server, [{**call["request"], "model": call["id"]} for call in calls]


def _feed(phoenix: PhoenixProcess, project: str, answers: tuple[OpenAIServer, list[dict[str, Any]]],
          count: int, interval: float) -> None:
    """`count` instrumented calls, one every `interval` seconds, their spans sent to the project as they end."""
    import openai

    server, requests = answers
    with send_spans(phoenix.server.url, project):
        client = openai.OpenAI(base_url=server.url, api_key="sk-fake", max_retries=0)
        for n in range(count):
            client.responses.create(**requests[n % len(requests)])
            time.sleep(interval)


def _spans(phoenix: PhoenixProcess, project: str) -> dict[str, str]:
    """Every LLM span of the project: span id → trace id."""
    found: dict[str, str] = {}
    params: dict[str, Any] = {"span_kind": "LLM", "limit": 1000}
    while True:
        body = httpx.get(f"{phoenix.server.url}/v1/projects/{project}/spans", params=params, timeout=60).json()
        found |= {s["context"]["span_id"]: s["context"]["trace_id"] for s in body["data"]}
        if not body.get("next_cursor"):
            return found
        params["cursor"] = body["next_cursor"]


def _starts(phoenix: PhoenixProcess, project: str) -> dict[str, dt.datetime]:
    """Every LLM span of the project: span id → start time."""
    body = httpx.get(f"{phoenix.server.url}/v1/projects/{project}/spans", params={"span_kind": "LLM", "limit": 1000},
                     timeout=60).json()
    return {s["context"]["span_id"]: parse_time(s["start_time"]) for s in body["data"]}


def _annotations(phoenix: PhoenixProcess, project: str, spans: list[str]) -> list[dict[str, Any]]:
    """Every `tlmscore.grounding` annotation of the spans."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(spans), 500):
        params: dict[str, Any] = {"span_ids": spans[start:start + 500], "limit": 10000,
                                  "include_annotation_names": "tlmscore.grounding"}
        body = httpx.get(f"{phoenix.server.url}/v1/projects/{project}/span_annotations", params=params,
                         timeout=60).json()
        assert not body.get("next_cursor")
        found += body["data"]
    return found


def _watcher(address: str, state: Path, cache: Path, *more: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tlmscore", "watch", address, "--state", str(state), "--cache-dir", str(cache),
               "--offline", "--poll", "0.3", "--late", "30", "--status-every", "1", *more]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _until_idle(address: str, state: Path, cache: Path, *more: str) -> str:
    done = _watcher(address, state, cache, "--until-idle", *more)
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    return err


def _identity(threshold: float = 0.5) -> str:
    return evaluator_of("grounding", {}, tlmscore.Settings(offline=True), threshold).id


def _by_identity(annotations: list[dict[str, Any]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for item in annotations:
        found.setdefault(item["identifier"], []).append(item["span_id"])
    return found


def test_ten_kills_during_a_live_feed_leave_one_annotation_per_sampled_span_the_same_for_a_second_watcher(
        phoenix: PhoenixProcess, answers: tuple[OpenAIServer, list[dict[str, Any]]], tmp_path: Path) -> None:
    project, count = "watch-kills", 120
    address = f"{phoenix.server.address}/{project}"
    state, cache = tmp_path / "watch.json", tmp_path / "cache"
    feeding = threading.Thread(target=_feed, args=(phoenix, project, answers, count, 0.3))
    feeding.start()
    chance = random.Random(42)  # noqa: S311  (where the kills land, the same on every run)
    kills = 0
    while kills < CYCLES:
        running = _watcher(address, state, cache, "--sample", str(RATE))
        time.sleep(chance.uniform(2.5, 6.0))  # the kill lands while starting, polling, scoring or annotating
        running.send_signal(signal.SIGKILL)
        running.wait()
        kills += 1
    feeding.join()
    wait_for_spans(phoenix.server.url, project, count)
    _until_idle(address, state, cache, "--sample", str(RATE))

    spans = _spans(phoenix, project)
    assert len(spans) == count
    expected = sorted(s for s, trace in spans.items() if sampled(sample_key({"trace_id": trace}), RATE))
    assert 0 < len(expected) < count
    annotations = _annotations(phoenix, project, list(spans))
    mine = _by_identity(annotations)[_identity()]
    assert sorted(mine) == expected  # none lost, none doubled, none outside the sample
    first = next(a for a in annotations if a["identifier"] == _identity())
    assert first["annotator_kind"] == "CODE"
    assert first["metadata"]["evaluator"] == {"id": _identity(), "scorer": "grounding",
                                              "version": tlmscore.__version__, "settings": _identity().split("#")[1]}
    saved = load_state(state)
    assert saved.evaluator == _identity()
    assert len(saved.seen) <= count

    # a second watcher with the same rate (another identity: its threshold) samples the same spans
    _until_idle(address, tmp_path / "second.json", cache, "--sample", str(RATE), "--threshold", "0.6", "--rescore")
    again = _by_identity(_annotations(phoenix, project, list(spans)))
    assert sorted(again[_identity(0.6)]) == expected
    assert sorted(again[_identity()]) == expected

    # a higher rate scores the calls that arrive from now on, all of them, and does not go back
    _feed(phoenix, project, answers, 20, 0.0)
    wait_for_spans(phoenix.server.url, project, count + 20)
    _until_idle(address, state, cache, "--sample", "1")
    later = _by_identity(_annotations(phoenix, project, list(_spans(phoenix, project))))[_identity()]
    new = set(_spans(phoenix, project)) - set(spans)
    assert sorted(later) == sorted([*expected, *new])


def test_a_changed_identity_rescores_only_when_asked(phoenix: PhoenixProcess,
                                                     answers: tuple[OpenAIServer, list[dict[str, Any]]],
                                                     tmp_path: Path) -> None:
    project = "watch-rescore"
    address = f"{phoenix.server.address}/{project}"
    _feed(phoenix, project, answers, 6, 0.0)
    wait_for_spans(phoenix.server.url, project, 6)
    state, cache = tmp_path / "watch.json", tmp_path / "cache"
    _until_idle(address, state, cache)
    refused = subprocess.run([sys.executable, "-m", "tlmscore", "watch", address, "--state", str(state), "--offline",
                              "--threshold", "0.7", "--until-idle"], capture_output=True, text=True, check=False,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert refused.returncode == 2
    assert "give --rescore" in refused.stderr
    assert "Traceback" not in refused.stderr
    other = tmp_path / "other.json"  # a fresh cursor, another identity: the spans another identity scored wait
    err = _until_idle(address, other, cache, "--threshold", "0.7")
    assert "another evaluator 6" in err
    _until_idle(address, tmp_path / "third.json", cache, "--threshold", "0.7", "--rescore")
    found = _by_identity(_annotations(phoenix, project, list(_spans(phoenix, project))))
    assert len(found[_identity(0.7)]) == len(found[_identity()]) == 6


def test_a_store_that_stops_is_waited_for_and_sigterm_saves_the_cursor(
        phoenix: PhoenixProcess, answers: tuple[OpenAIServer, list[dict[str, Any]]], tmp_path: Path) -> None:
    project = "watch-down"
    address = f"{phoenix.server.address}/{project}"
    _feed(phoenix, project, answers, 5, 0.0)
    wait_for_spans(phoenix.server.url, project, 5)
    state, cache = tmp_path / "watch.json", tmp_path / "cache"
    running = _watcher(address, state, cache)
    deadline = time.monotonic() + 120
    while len(_annotations(phoenix, project, list(_spans(phoenix, project)))) < 5:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    phoenix.stop()
    time.sleep(4)
    assert running.poll() is None  # still waiting for the store
    phoenix.start()
    _feed(phoenix, project, answers, 5, 0.0)
    wait_for_spans(phoenix.server.url, project, 10)
    while len(_annotations(phoenix, project, list(_spans(phoenix, project)))) < 10:
        assert time.monotonic() < deadline + 120
        time.sleep(0.5)
    running.send_signal(signal.SIGTERM)
    _, err = running.communicate(timeout=60)
    assert running.returncode == 0
    assert err.count("the store does not answer") == 1
    assert "the store answers again" in err
    assert "seen 10 · scored 10" in err.strip().splitlines()[-1]
    saved = load_state(state)
    starts = _starts(phoenix, project)
    assert saved.watermark is not None
    assert parse_time(saved.watermark) == max(starts.values())  # the cursor is at the newest call
    assert set(saved.seen) <= set(starts)
    assert saved.counts["seen"] == saved.counts["annotated"] == 10


def _ratings(body: dict[str, Any], n: int) -> ChatReply:
    return ChatReply(body=completion("A", [("A", -0.1), ("B", -3.0), ("C", -3.0)]))


def test_the_cost_cap_holds_to_the_request(phoenix: PhoenixProcess,
                                           answers: tuple[OpenAIServer, list[dict[str, Any]]], tmp_path: Path) -> None:
    project = "watch-cost"
    address = f"{phoenix.server.address}/{project}"
    _feed(phoenix, project, answers, 12, 0.0)
    wait_for_spans(phoenix.server.url, project, 12)
    cap = 0.05
    options = {"model": "fake", "price_in": 20.0, "price_out": 20.0, "cache": False, "timeout": 10.0}
    notes: list[str] = []

    async def scored(judge: ChatServer) -> list[tlmscore.Row]:
        rows = watch(address, state=tmp_path / "watch.json", scorer="judge",
                              options={**options, "base_url": judge.url}, settings=tlmscore.Settings(offline=True),
                              max_cost_per_hour=cap, until_idle=True,
                              hooks=Hooks(note=notes.append), poll=0.2)
        return [row async for row in rows]

    with ChatServer(_ratings) as judge:
        rows = asyncio.run(scored(judge))
        sent = judge.calls
    saved = load_state(tmp_path / "watch.json")
    assert 0 < len(rows) < 12
    assert sent == 2 * len(rows)  # two reflections a call: no request for a call past the cap
    assert saved.spend["hour"][1] <= cap
    assert saved.counts["skipped.over cost cap"] == 12 - len(rows)
    assert sum("--max-cost-per-hour $0.05 reached" in n for n in notes) == 1
