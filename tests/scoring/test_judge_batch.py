"""The judge's Batch API mode against a local fake of the Files and Batches endpoints."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.servers.batch_server import BatchServer
from tests.servers.judge_server import ChatReply, ChatServer, completion, rating_reply
from tests.support.paths import ROOT
from tlmscore.model import ScoringInput
from tlmscore.scoring import get_scorer
from tlmscore.scoring.judge import JudgeScorer

INPUTS = [ScoringInput(prompt=f"User: What is {n} + {n}?\n\nAssistant:", response=str(2 * n)) for n in range(9)]
FAST = {"model": "fake", "poll_interval": 0.01, "max_poll_interval": 0.05, "timeout": 5.0, "retries": 0}


def batch_judge(server: BatchServer, folder: Path, **options: Any) -> JudgeScorer:
    scorer = get_scorer("judge", {**FAST, "base_url": server.url, "batch": True, "batch_dir": str(folder), **options})
    assert isinstance(scorer, JudgeScorer)
    return scorer


def run(scorer: JudgeScorer, inputs: list[ScoringInput] = INPUTS) -> list[Any]:
    """The scores of `inputs`: one each, in order (so a check over all of them covers every input)."""
    scores = asyncio.run(scorer.score_many(inputs))
    assert len(scores) == len(inputs), f"{len(scores)} scores for {len(inputs)} inputs"
    return list(scores)


def test_batch_mode_gives_the_live_scores(tmp_path: Path) -> None:
    with ChatServer(rating_reply) as live:
        expected = asyncio.run(get_scorer("judge", {**FAST, "base_url": live.url}).score_many(INPUTS))
    with BatchServer() as server:
        scores = run(batch_judge(server, tmp_path / "b"))
    assert [s.score for s in scores] == pytest.approx([s.score for s in expected])
    assert all(s.error is None and s.details["reflections"][0]["from_logprobs"] for s in scores)
    assert len(server.batches) == 1 and sum(server.submitted.values()) == 2 * len(INPUTS)
    lines = [json.loads(line) for line in (tmp_path / "b" / "input-000001.jsonl").read_text().splitlines()]
    assert {tuple(sorted(line)) for line in lines} == {("body", "custom_id", "method", "url")}
    assert {(line["method"], line["url"]) for line in lines} == {("POST", "/v1/chat/completions")}
    assert all(line["body"]["model"] == "fake" and line["body"]["logprobs"] is True for line in lines)


def test_a_rerun_sends_nothing_again(tmp_path: Path) -> None:
    with BatchServer() as server:
        first = run(batch_judge(server, tmp_path))
        requests = len(server.requests)
        second = run(batch_judge(server, tmp_path))
    assert [s.score for s in first] == [s.score for s in second]
    assert len(server.batches) == 1 and len(server.requests) == requests
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["batches"][0]["collected"] is True


def test_samples_take_a_second_round(tmp_path: Path) -> None:
    def reply(body: dict[str, Any], n: int) -> ChatReply:
        if len(body["messages"]) == 1:
            return ChatReply(body=completion("It is 5."))
        if "Answer 2:" in body["messages"][1]["content"]:
            return ChatReply(body=completion("B"))
        return ChatReply(body=completion("A"))

    with BatchServer(reply) as server:
        scores = run(batch_judge(server, tmp_path, samples=3, logprobs=False), INPUTS[:2])
    assert len(server.batches) == 2
    assert sum(server.submitted.values()) == 2 * (2 + 3 + 3)
    for score in scores:
        assert score.details["self_reflection"] == 1.0 and score.details["observed_consistency"] == 0.0
        assert score.score == pytest.approx(0.3)


def test_failed_requests_fail_their_rows_and_are_sent_again_on_a_rerun(tmp_path: Path) -> None:
    bad = {"What is 3 + 3?", "What is 5 + 5?"}

    def flaky(body: dict[str, Any], n: int) -> ChatReply:
        if any(b in body["messages"][1]["content"] for b in bad):
            return ChatReply(500, {"error": {"message": "server overloaded"}})
        return rating_reply(body, n)

    with BatchServer(flaky) as server:
        scores = run(batch_judge(server, tmp_path))
        failed = [i for i, s in enumerate(scores) if s.error]
        assert failed == [3, 5]
        assert all("HTTP 500: server overloaded" in (scores[i].error or "") for i in failed)
        assert math.isnan(scores[3].score)
        bad.clear()
        again = run(batch_judge(server, tmp_path))
    assert all(s.error is None for s in again)
    assert len(server.batches) == 2
    assert sorted(server.submitted.values()) == [1] * (2 * len(INPUTS) - 4) + [2] * 4


def test_an_endpoint_rejecting_logprobs_gets_them_again_without(tmp_path: Path) -> None:
    def no_logprobs(body: dict[str, Any], n: int) -> ChatReply:
        if body.get("logprobs"):
            return ChatReply(400, {"error": {"message": "logprobs is not supported for this model"}})
        return ChatReply(body=completion("B"))

    with BatchServer(no_logprobs) as server:
        scores = run(batch_judge(server, tmp_path), INPUTS[:3])
    assert all(s.score == 0.0 and s.details["logprobs_available"] is False for s in scores)
    assert len(server.batches) == 2


def test_a_reasoning_model_gets_the_parameters_it_takes_in_batches_too(tmp_path: Path) -> None:
    from tests.scoring.test_judge import reasoning_model

    with BatchServer(reasoning_model) as server:
        scores = run(batch_judge(server, tmp_path, max_tokens=256), INPUTS[:3])
        again = run(batch_judge(server, tmp_path, max_tokens=256), INPUTS[:3])
    assert all(s.error is None and s.score == 0.0 for s in (*scores, *again))
    assert len(server.batches) == 4  # the first form, then one parameter learnt per batch
    final = [json.loads(line)["body"] for line in (tmp_path / "input-000004.jsonl").read_text().splitlines()]
    assert all(b["max_completion_tokens"] == 256 and "temperature" not in b and "logprobs" not in b for b in final)
    with BatchServer(reasoning_model) as server:  # other rows in the same folder: sent in the final form at once
        later = run(batch_judge(server, tmp_path, max_tokens=256), INPUTS[3:6])
    assert all(s.error is None for s in later) and len(server.batches) == 1


def test_a_failed_batch_fails_its_rows_with_the_reason(tmp_path: Path) -> None:
    with BatchServer(fail_status="expired") as server:
        scores = run(batch_judge(server, tmp_path), INPUTS[:2])
    assert len(scores) == 2
    assert all("expired" in (s.error or "") and math.isnan(s.score) for s in scores)


def test_requests_are_split_into_batches_of_the_size_given(tmp_path: Path) -> None:
    with BatchServer() as server:
        scores = run(batch_judge(server, tmp_path, batch_max_requests=5))
    assert len(scores) == len(INPUTS) and all(s.scored for s in scores)
    assert len(server.batches) == 4  # 18 requests in batches of 5
    assert sum(server.submitted.values()) == 18 and set(server.submitted.values()) == {1}


def test_a_batch_still_running_is_found_again_even_when_its_id_was_not_saved(tmp_path: Path) -> None:
    with BatchServer() as server:
        server.release.clear()
        scores = run(batch_judge(server, tmp_path, batch_wait=0.1), INPUTS[:2])
        assert all("still in_progress" in (s.error or "") for s in scores)
        state_path = tmp_path / "state.json"
        state = json.loads(state_path.read_text())
        assert state["batches"][0]["file_id"] and state["batches"][0]["batch_id"]
        state["batches"][0]["batch_id"] = None  # as if stopped between creating the batch and saving its id
        state_path.write_text(json.dumps(state))
        server.release.set()
        again = run(batch_judge(server, tmp_path), INPUTS[:2])
    assert len(again) == 2 and all(s.scored for s in again)
    assert len(server.batches) == 1 and set(server.submitted.values()) == {1}


def test_an_unreachable_endpoint_fails_the_rows_not_the_batch(tmp_path: Path) -> None:
    with BatchServer() as server:
        url = server.url
    scorer = get_scorer("judge", {**FAST, "base_url": url, "batch": True, "batch_dir": str(tmp_path)})
    scores = asyncio.run(scorer.score_many(INPUTS[:3]))
    assert len(scores) == 3
    assert all(math.isnan(s.score) and "judge batch mode: APIConnectionError" in (s.error or "") for s in scores)


def test_submit_only_submits_and_a_later_run_collects(tmp_path: Path) -> None:
    with BatchServer() as server:
        server.release.clear()
        submitted = run(batch_judge(server, tmp_path, batch_submit_only=True))
        assert all(math.isnan(s.score) and s.error is None and "run again" in s.explanation for s in submitted)
        polled = [path for method, path in server.requests if method == "GET" and path.startswith("/v1/batches/")]
        assert len(server.batches) == 1 and not polled
        server.release.set()
        scores = run(batch_judge(server, tmp_path))
    assert all(s.scored for s in scores) and len(server.batches) == 1


def test_the_command_line_submits_every_chunk_before_waiting_for_any(tmp_path: Path) -> None:
    transcripts(tmp_path / "in.jsonl", 9)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    with BatchServer() as server:
        server.release.clear()
        process = subprocess.Popen([*cli(server, tmp_path), "--chunk-size", "3"], cwd=ROOT, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while len(server.batches) < 3 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        states = {b["status"] for b in server.batches.values()}
        server.release.set()
        _, err = process.communicate(timeout=120)
    assert len(server.batches) == 3 and states <= {"validating", "in_progress"}  # all out, none finished
    assert process.returncode == 0, err
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(out) == 9 and all(r["score"] > 0.8 for r in out)
    assert set(server.submitted.values()) == {1}


def test_batch_mode_needs_a_folder() -> None:
    from tlmscore.errors import ScorerError

    with pytest.raises(ScorerError, match="batch_dir"):
        get_scorer("judge", {"model": "m", "base_url": "http://127.0.0.1:9/v1", "batch": True})


# ---------------------------------------------------------------- 1,000 rows, killed and resumed


def transcripts(path: Path, n: int) -> None:
    with path.open("w") as out:
        for i in range(n):
            message = {"id": f"msg_{i}", "type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": str(2 * i), "annotations": []}]}
            record = {"id": f"row-{i}", "request": {"model": "m", "input": f"What is {i} + {i}?"},
                      "response": {"id": f"resp_{i}", "object": "response", "status": "completed",
                                   "model": "m", "output": [message]}}
            out.write(json.dumps(record) + "\n")


def cli(server: BatchServer, folder: Path) -> list[str]:
    return [sys.executable, "-m", "tlmscore", "score", str(folder / "in.jsonl"), "-o", str(folder / "out.jsonl"),
            "--scorer", "judge", "--base-url", server.url, "--model", "fake", "--judge-batch", "--offline",
            "--quiet", "--cache-dir", str(folder / "cache"), "--option", "poll_interval=0.05",
            "--option", "max_poll_interval=0.2", "--option", "batch_max_requests=500"]


def test_a_thousand_rows_killed_mid_run_and_resumed_run_every_request_once(tmp_path: Path) -> None:
    rows = 1000
    transcripts(tmp_path / "in.jsonl", rows)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    with BatchServer() as server:
        server.release.clear()  # batches stay in progress until the first run is dead
        first = subprocess.Popen(cli(server, tmp_path), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not server.batches and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
        assert server.batches, "the first run submitted nothing in time"
        first.kill()  # SIGKILL: no cleanup of any kind
        first.wait(timeout=30)
        assert first.stderr is not None
        announced = first.stderr.read().decode()
        first.stderr.close()
        assert "judge: 2,000 requests through the Batch API for 1,000 rows" in announced
        submitted_before = len(server.batches)
        server.release.set()
        second = subprocess.run(cli(server, tmp_path), cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=300, check=False)
    assert second.returncode == 0, second.stderr
    assert "in batches submitted before" in second.stderr
    assert len(server.submitted) == 2 * rows
    assert set(server.submitted.values()) == {1}, "a request was submitted twice"
    assert len(server.batches) == 4 and submitted_before >= 1
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in out) == sorted(f"row-{i}" for i in range(rows))
    assert all(r["error"] is None and r["score"] > 0.8 for r in out)
    results = (tmp_path / "out.jsonl.judge-batch" / "results.jsonl").read_text().splitlines()
    assert len(results) == 2 * rows
