"""Options and commands the README documents, held by what they change: the grounding scorer's
`min_words`, `max_listed` and `messages`, what the judge sends for `sample_temperature` and
`extra_body`, and the command line's `--batch-input`, `--api-key-env`, `--quality-preset`,
`calibrate --folds`, `cache stats` / `cache clear` and `--engine ray`'s refusals (before Ray
starts); and what the tlm scorer sends to a fake Cleanlab API (cleanlab-tlm reads its address,
`CLEANLAB_API_BASE_URL`, when imported: a process of its own)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tests.servers.judge_server import ChatReply, ChatServer, LoopbackServer, completion
from tests.support.paths import FIXTURES, ROOT
from tlmscore.cli import main
from tlmscore.model import Evidence, ScoringInput
from tlmscore.scoring import Score, get_scorer

TOOL = Evidence("tool", "The museum opens on Sundays.", call_id="c1", tool="lookup")
USER_SAYS = "The ferry leaves the harbour at nine every morning."


def grounding(response: str, evidence: tuple[Evidence, ...] = (TOOL,), **options: Any) -> Score:
    item = ScoringInput(prompt="User: When does the ferry leave?\n\nAssistant:", response=response, evidence=evidence)
    (score,) = asyncio.run(get_scorer("grounding", options).score_many([item]))
    return score


# ---------------------------------------------------------------- grounding options


@pytest.mark.parametrize(("min_words", "claims"), [(2, 3), (3, 2), (4, 1)])
def test_min_words_is_the_content_words_a_sentence_needs_to_be_a_claim(min_words: int, claims: int) -> None:
    # content words: 2, 3 and 4, and no number or name in any sentence
    score = grounding("Ferries sail. Large boats float. Grey gulls circle harbours.", min_words=min_words)
    assert score.details["claims"] == claims


def test_min_words_above_every_sentence_leaves_nothing_to_check() -> None:
    score = grounding("Ferries sail. Boats float.", min_words=3)
    assert math.isnan(score.score) and "no statement to check" in score.explanation


@pytest.mark.parametrize("limit", [0, 1, 2, 20])
def test_max_listed_caps_the_unsupported_claims_listed_not_the_counts(limit: int) -> None:
    score = grounding("Zebras paint violet murals in Oslo. Penguins drive taxis through Lima. "
                      "Owls compose symphonies in Quito.", max_listed=limit)
    assert (score.details["claims"], score.details["supported"]) == (3, 0)
    assert len(score.details["unsupported"]) == min(limit, 3)
    assert len(score.details["support_by_claim"]) == 3


@pytest.mark.parametrize(("policy", "counted"), [("none", 0), ("context", 0), ("system", 0), ("all", 1)])
def test_only_messages_all_makes_a_user_message_evidence(policy: str, counted: int) -> None:
    score = grounding(USER_SAYS, (TOOL, Evidence("message", USER_SAYS, origin="user")), messages=policy)
    assert score.details["evidence"]["messages"] == counted
    assert score.details["supported"] == counted
    assert score.score == (1.0 if counted else 0.0)


def test_messages_context_and_system_count_a_system_message() -> None:
    system = Evidence("message", USER_SAYS, origin="system")
    for policy in ("context", "system", "all"):
        assert grounding(USER_SAYS, (TOOL, system), messages=policy).details["supported"] == 1
    assert grounding(USER_SAYS, (TOOL, system), messages="none").details["supported"] == 0


# ---------------------------------------------------------------- what the judge sends


def test_sample_temperature_and_extra_body_are_what_the_judge_sends() -> None:
    def reply(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply(body=completion("It is 4." if len(body["messages"]) == 1 else "A"))

    with ChatServer(reply) as server:
        scorer = get_scorer("judge", {"model": "fake", "timeout": 5.0, "base_url": server.url, "samples": 2,
                                      "logprobs": False, "temperature": 0.0, "sample_temperature": 1.3,
                                      "extra_body": {"seed": 7, "top_k": 3}})
        (score,) = asyncio.run(scorer.score_many([ScoringInput(prompt="User: 2 + 2?\n\nAssistant:", response="4")]))
    assert score.scored
    samples = [b for b in server.bodies if len(b["messages"]) == 1]
    ratings = [b for b in server.bodies if len(b["messages"]) != 1]
    assert len(samples) == 2 and len(ratings) == 2 + 2  # two reflections, one agreement per sample
    assert [b["temperature"] for b in samples] == [1.3, 1.3]
    assert {b["temperature"] for b in ratings} == {0.0}
    assert all(b["seed"] == 7 and b["top_k"] == 3 for b in server.bodies)


# ---------------------------------------------------------------- the command line


BATCH_IN, BATCH_OUT = FIXTURES / "batch_input.jsonl", FIXTURES / "batch_output.jsonl"
LABELLED = FIXTURES / "labelled"


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_batch_input_joins_the_requests_into_the_prompts(tmp_path: Path) -> None:
    base = [str(BATCH_OUT), "--offline", "--quiet", "--cache-dir", str(tmp_path / "c")]
    assert main(["prepare", *base, "-o", str(tmp_path / "joined.jsonl"), "--batch-input", str(BATCH_IN)]) == 0
    assert main(["prepare", *base, "-o", str(tmp_path / "alone.jsonl")]) == 0
    joined, alone = rows(tmp_path / "joined.jsonl"), rows(tmp_path / "alone.jsonl")
    assert joined[1]["prompt"] == ("System: Answer in one sentence.\n\nUser: What is the capital of Portugal?"
                                   "\n\nAssistant:")
    assert joined[2]["prompt"] == "Name one prime above 100."
    assert "What is the capital of Portugal?" not in (alone[1]["prompt"] or "")


def test_api_key_env_names_the_judge_key_which_is_sent_and_never_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-surface-test-0123")
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"id": "r1", "request": {"messages": [{"role": "user", "content": "2 + 2?"}]},
                               "response": {"id": "c1", "object": "chat.completion", "model": "m", "choices": [
                                   {"index": 0, "message": {"role": "assistant", "content": "4"},
                                    "finish_reason": "stop"}]}}) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with ChatServer(lambda body, n: ChatReply(body=completion("A"))) as server:
        code = main(["score", str(log), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(tmp_path / "c"),
                     "--scorer", "judge", "--model", "fake", "--base-url", server.url,
                     "--api-key-env", "MY_JUDGE_KEY"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert server.calls >= 1
    assert all(h.get("authorization") == "Bearer sk-surface-test-0123" for h in server.headers)
    assert "sk-surface-test-0123" not in out.read_text(encoding="utf-8") + captured.out + captured.err


def test_api_key_env_naming_an_unset_variable_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    code = main(["score", str(BATCH_OUT), "-o", str(tmp_path / "out.jsonl"), "--offline", "--quiet",
                 "--cache-dir", str(tmp_path / "c"), "--scorer", "judge", "--model", "fake",
                 "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "NO_SUCH_KEY_VAR"])
    assert code == 2
    assert "NO_SUCH_KEY_VAR" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("folds")
    out = folder / "scored.jsonl"
    assert main(["score", str(LABELLED / "labelled.jsonl"), "-o", str(out), "--offline", "--quiet",
                 "--pages", str(LABELLED / "pages"), "--cache-dir", str(folder / "cache")]) == 0
    return out


@pytest.mark.parametrize("folds", [2, 3])
def test_calibrate_folds_is_the_number_of_held_out_folds(scored: Path, tmp_path: Path, folds: int,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    calib = tmp_path / "calib.json"
    assert main(["calibrate", str(scored), "--labels", "label", "--labels-from", str(LABELLED / "labelled.jsonl"),
                 "--positive", "faithful", "--folds", str(folds), "-o", str(calib)]) == 0
    assert json.loads(calib.read_text(encoding="utf-8"))["validation"]["folds"] == folds
    assert f"({folds} folds)" in capsys.readouterr().err


def test_cache_stats_and_clear_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    with EvidenceServer() as server:
        good = server.route("/good", Reply(body=html_page("Ferry", "The ferry runs every twenty minutes.")))
        gone = server.route("/gone", Reply(status=404, body=b"not here"))
        record = {"id": "r1", "request": {"input": "How often does the ferry run?"}, "response": {
            "id": "resp_1", "object": "response", "model": "gpt-4.1", "output": [
                {"type": "web_search_call", "id": "ws_1", "status": "completed",
                 "action": {"type": "search", "query": "ferry",
                            "sources": [{"type": "url", "url": good}, {"type": "url", "url": gone}]}},
                {"type": "message", "id": "m1", "role": "assistant", "status": "completed", "content": [
                    {"type": "output_text", "text": "Every twenty minutes.", "annotations": []}]}]}}
        log = tmp_path / "log.jsonl"
        log.write_text(json.dumps(record) + "\n", encoding="utf-8")
        assert main(["prepare", str(log), "-o", str(tmp_path / "out.jsonl"), "--cache-dir", str(cache),
                     "--allow-host", "127.0.0.1", "--quiet"]) == 0
    capsys.readouterr()

    def stats() -> dict[str, str]:
        assert main(["cache", "stats", "--cache-dir", str(cache)]) == 0
        return dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())

    before = stats()
    assert (before["directory"], before["entries"], before["ok"], before["failed"]) == (str(cache), "2", "1", "1")
    assert int(before["size_bytes"]) > 0
    assert main(["cache", "clear", "--cache-dir", str(cache)]) == 0
    assert f"removed 2 cached pages from {cache}" in capsys.readouterr().err
    after = stats()
    assert (after["entries"], after["ok"], after["failed"]) == ("0", "0", "0")


# ---------------------------------------------------------------- what the tlm scorer sends Cleanlab


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


# ---------------------------------------------------------------- Ray's refusals, before Ray starts


def test_ray_refuses_what_it_cannot_do_yet_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    code = main(["score", str(BATCH_OUT), "-o", str(out), "--engine", "ray", "--offline", "--quiet",
                 "--cache-dir", str(tmp_path / "c"), "--hydrate"])
    assert code == 2
    assert capsys.readouterr().err == "tlmscore: error: --hydrate: not available with --engine ray yet\n"  # one line
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()  # Ray never started
    assert not out.exists()


def test_ray_refuses_a_live_source_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    code = main(["prepare", "phoenix://127.0.0.1:9/project", "-o", str(out), "--engine", "ray", "--quiet",
                 "--cache-dir", str(tmp_path / "c")])
    assert code == 2
    refused = "live sources: not available with --engine ray yet (read them on one machine)"
    assert capsys.readouterr().err == f"tlmscore: error: {refused}\n"
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    assert not out.exists()
