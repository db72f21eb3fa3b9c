"""The tlm scorer: clear set-up errors, and batching and results through a fake TLM (no network); what
the real client sends (preset, key, options), held against a fake Cleanlab API (cleanlab-tlm reads its address,
`CLEANLAB_API_BASE_URL`, when imported: a process of its own)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.servers.judge_server import LoopbackServer
from tests.support.paths import FIXTURES, ROOT
from tlmscore.errors import ScorerError
from tlmscore.model import ScoringInput
from tlmscore.scoring import get_scorer
from tlmscore.scoring.tlm import TLMOptions, TLMScorer

INPUTS = [ScoringInput(prompt=f"User: question {n}\n\nAssistant:", response=f"answer {n}") for n in range(5)]


class FakeTLM:
    """Stands in for `cleanlab_tlm.TLM`: records batches; row 3 fails the way TLM reports failures."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def get_trustworthiness_score(self, prompt: Sequence[str], response: Sequence[str]) -> list[dict[str, Any]]:
        self.batches.append(list(prompt))
        results: list[dict[str, Any]] = []
        for p, r in zip(prompt, response, strict=True):
            n = int(r.split()[-1])
            if n == 3:
                results.append({"trustworthiness_score": None,
                                "log": {"error": {"message": "rate limited", "retryable": True}}})
            else:
                results.append({"trustworthiness_score": n / 10,
                                "log": {"explanation": f"checked {p[:6]}", "per_field_score": {"x": 1}}})
        return results


class AsyncFakeTLM(FakeTLM):
    async def get_trustworthiness_score_async(self, prompt: Sequence[str],
                                              response: Sequence[str]) -> list[dict[str, Any]]:
        return self.get_trustworthiness_score(prompt, response)


def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CLEANLAB_API_KEY", "CLEANLAB_TLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_missing_key_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    no_key(monkeypatch)
    with pytest.raises(ScorerError, match="CLEANLAB_API_KEY"):
        get_scorer("tlm")
    with pytest.raises(ScorerError, match="MY_KEY"):
        get_scorer("tlm", {"api_key_env": "MY_KEY"})


def test_missing_package_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLEANLAB_API_KEY", "test-key")
    monkeypatch.setitem(sys.modules, "cleanlab_tlm", None)
    with pytest.raises(ScorerError, match=r"pip install 'tlmscore\[tlm\]'"):
        get_scorer("tlm")


def test_bad_options_are_rejected_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLEANLAB_API_KEY", "test-key")
    with pytest.raises(ScorerError, match="quality_preset"):
        get_scorer("tlm", {"quality_preset": "ultra"})
    with pytest.raises(ScorerError, match="could not be set up"):
        get_scorer("tlm", {"options": {"no_such_option": 1}})


@pytest.mark.parametrize("fake", [FakeTLM, AsyncFakeTLM])
def test_batches_scores_explanations_and_row_errors(fake: type[FakeTLM]) -> None:
    client = fake()
    scorer = TLMScorer(TLMOptions(batch_size=2), client=client)
    scores = asyncio.run(scorer.score_many(INPUTS))
    assert [len(b) for b in client.batches] == [2, 2, 1]
    assert len(scores) == len(INPUTS)
    assert [s.score for s in scores if s.scored] == [0.0, 0.1, 0.2, 0.4]
    assert scores[1].explanation == "checked User: " and scores[1].details == {"per_field_score": {"x": 1}}
    assert math.isnan(scores[3].score) and scores[3].error == "rate limited"
    assert scores[3].details == {"retryable": True}


def test_a_failed_call_fails_its_batch_only() -> None:
    class Flaky(FakeTLM):
        def get_trustworthiness_score(self, prompt: Sequence[str], response: Sequence[str]) -> list[dict[str, Any]]:
            if len(self.batches) == 1:
                self.batches.append(list(prompt))
                raise TimeoutError("TLM timed out")
            return super().get_trustworthiness_score(prompt, response)

    scores = asyncio.run(TLMScorer(TLMOptions(batch_size=2), client=Flaky()).score_many(INPUTS))
    assert len(scores) == len(INPUTS)
    assert [s.error for s in scores[2:4]] == ["TLM call failed: TimeoutError: TLM timed out"] * 2
    assert scores[0].scored and scores[1].scored and scores[4].scored


def test_a_wrong_number_of_results_fails_the_batch() -> None:
    class Short(FakeTLM):
        def get_trustworthiness_score(self, prompt: Sequence[str], response: Sequence[str]) -> list[dict[str, Any]]:
            return super().get_trustworthiness_score(prompt, response)[:-1]

    scores = asyncio.run(TLMScorer(TLMOptions(batch_size=5), client=Short()).score_many(INPUTS))
    assert len(scores) == len(INPUTS) and all(s.error for s in scores)


BATCH_IN, BATCH_OUT = FIXTURES / "batch_input.jsonl", FIXTURES / "batch_output.jsonl"


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class CleanlabServer(LoopbackServer):
    """A fake Cleanlab API: records each request's path, headers and body; every answer scores 0.75."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's name)
                """Keep test output quiet."""

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                data = json.dumps({"confidence_score": 0.75, "log": {"explanation": "looks right"}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(Handler)


def run_tlm(tmp_path: Path, server: CleanlabServer, *flags: str) -> subprocess.CompletedProcess[str]:
    """`tlmscore score --scorer tlm FLAGS` in a process of its own, its Cleanlab API at `server` (never the
    internet, even when an option stops being checked)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLEANLAB_")}
    env |= {"CLEANLAB_API_BASE_URL": server.url.removesuffix("/v1") + "/api", "MY_TLM_KEY": "tlm-surface-key-42",
            "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tlmscore", "score", str(BATCH_OUT), "--batch-input", str(BATCH_IN),
                           "-o", str(tmp_path / "out.jsonl"), "--offline", "--quiet", "--cache-dir",
                           str(tmp_path / "c"), "--scorer", "tlm", "--api-key-env", "MY_TLM_KEY", *flags],
                          capture_output=True, text=True, timeout=300, check=False, env=env)


def score_with_tlm(tmp_path: Path, server: CleanlabServer, *flags: str) -> list[dict[str, Any]]:
    proc = run_tlm(tmp_path, server, *flags)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out.jsonl"
    assert "tlm-surface-key-42" not in out.read_text(encoding="utf-8") + proc.stdout + proc.stderr
    return rows(out)


def test_tlm_sends_the_preset_the_key_and_the_options_with_explanations(tmp_path: Path) -> None:
    with CleanlabServer() as server:
        scored = score_with_tlm(tmp_path, server, "--quality-preset", "high", "--option", 'options={"max_tokens": 256}')
    assert [r["score"] for r in scored[1:]] == [0.75, 0.75]  # row 0 is a failed batch request, not scored
    assert scored[1]["explanation"] == "looks right"
    assert len(server.seen) == 2
    for path, headers, body in server.seen:
        assert path.endswith("/trustworthy_llm/get_confidence_score")
        assert headers["authorization"] == "bearer tlm-surface-key-42"
        assert body["quality"] == "high"
        assert body["options"]["max_tokens"] == 256 and "explanation" in body["options"]["log"]
    assert sorted(body["prompt"] for _, _, body in server.seen) == [
        "Name one prime above 100.",
        "System: Answer in one sentence.\n\nUser: What is the capital of Portugal?\n\nAssistant:"]


def test_tlm_preset_that_cannot_log_explanations_is_sent_without_them(tmp_path: Path) -> None:
    with CleanlabServer() as server:
        score_with_tlm(tmp_path, server, "--quality-preset", "low")
    assert server.seen and all(body["quality"] == "low" and "explanation" not in body["options"].get("log", [])
                               for _, _, body in server.seen)


def test_quality_preset_not_known_to_tlm_is_a_usage_error_before_any_request(tmp_path: Path) -> None:
    with CleanlabServer() as server:
        proc = run_tlm(tmp_path, server, "--quality-preset", "ultra")
    assert proc.returncode == 2 and "quality_preset" in proc.stderr
    assert not server.seen and not (tmp_path / "out.jsonl").exists()


class DeadTLM:
    """A TLM whose every call fails as a client without network does."""

    def __init__(self) -> None:
        self.calls = 0

    def get_trustworthiness_score(self, prompt: Sequence[str], response: Sequence[str]) -> list[dict[str, Any]]:
        self.calls += 1
        raise ConnectionError("network is unreachable")


def test_tlm_is_given_up_after_three_failed_calls_in_a_row_and_the_rows_say_why() -> None:
    dead = DeadTLM()
    scorer = TLMScorer(TLMOptions(batch_size=1), client=dead)
    scores = asyncio.run(scorer.score_many(INPUTS))
    assert dead.calls == 3  # five batches of one: three calls, then none
    assert [s.error for s in scores[:3]] == ["TLM call failed: ConnectionError: network is unreachable"] * 3
    assert [s.error for s in scores[3:]] == ["TLM not asked: gave up after 3 failed TLM calls in a row "
                                             "(last: ConnectionError: network is unreachable)"] * 2
    assert all(math.isnan(s.score) for s in scores)


def test_tlm_has_a_timeout_per_item_unless_one_is_given() -> None:
    assert TLMOptions().timeout == 120.0
    assert TLMOptions(timeout=5).timeout == 5.0
    with pytest.raises(ValueError, match="greater than 0"):
        TLMOptions(timeout=0)
