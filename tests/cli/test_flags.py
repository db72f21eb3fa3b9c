"""Flags held by what they change: --batch-input, --api-key-env."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.servers.judge_server import ChatReply, ChatServer, completion
from tests.support.paths import FIXTURES
from tlmscore.cli import main

BATCH_IN, BATCH_OUT = FIXTURES / "batch_input.jsonl", FIXTURES / "batch_output.jsonl"


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
