# ruff: noqa: RUF001  (Chinese and Japanese text uses full-width punctuation, as written)
"""`<think>` reasoning of chat reasoning models is not part of the scored answer, nor of earlier turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tlmscore import MemoryPages, Settings, compat
from tlmscore.cli import main
from tlmscore.convert import split_think

OFFLINE = Settings(offline=True)


@pytest.mark.parametrize(("text", "answer", "reasoning", "unclosed"), [
    ("Paris.", "Paris.", (), False),
    ("<think>\nThe capital of France.\n</think>\n\nParis.", "Paris.", ("The capital of France.",), False),
    ("The user asks.\n</think>\n\nParis.", "Paris.", ("The user asks.",), False),
    ("<think>a</think>One. <think>b</think>Two.", "One. Two.", ("a", "b"), False),
    ("<think>\n用户问的是长城。", "", ("用户问的是长城。",), True),
    ("  <think>\nThe user wants", "", ("The user wants",), True),
    ("Paris<think>wait, check", "Paris<think>wait, check", (), False),
    ("Use the `<think>` tag? No: just answer.", "Use the `<think>` tag? No: just answer.", (), False),
])
def test_split_think(text: str, answer: str, reasoning: tuple[str, ...], unclosed: bool) -> None:
    split = split_think(text)
    assert (split.text, split.reasoning, split.unclosed) == (answer, reasoning, unclosed)


def completion(content: str, finish_reason: str = "stop", **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "deepseek-reasoner",
            "choices": [{"index": 0, "finish_reason": finish_reason,
                         "message": {"role": "assistant", "content": content}}], **extra}


HISTORY = [{"role": "user", "content": "长城有多长？"},
           {"role": "assistant", "content": "<think>\n查一下资料。\n</think>\n\n约两万一千公里。"},
           {"role": "user", "content": "それはいつ建てられましたか？"}]

RECORDS = [
    {"id": "deepseek", "request": {"model": "deepseek-reasoner", "messages": HISTORY},
     "response": completion("<think>\n紀元前七世紀から建設が始まった。\n</think>\n\n"
                            "紀元前7世紀に建設が始まりました。")},
    {"id": "qwen-no-open-tag", "request": {"model": "qwq-32b", "messages": HISTORY[:1]},
     "response": completion("Okay, the user asks about the Great Wall.\n</think>\n\n约两万一千公里。")},
    {"id": "cut-while-thinking", "request": {"model": "deepseek-reasoner", "messages": HISTORY[:1]},
     "response": completion("<think>\n用户问长城的长度，我需要", "length")},
    {"id": "sonar-reasoning", "request": {"model": "sonar-reasoning", "messages": [
        {"role": "user", "content": "ما هي عاصمة مصر؟"}]},
     "response": completion("<think>\nThe user asks in Arabic.\n</think>\n\nعاصمة مصر هي القاهرة.[1]",
                            citations=["https://ar.wikipedia.org/wiki/القاهرة"])},
    {"id": "responses-api", "request": {"model": "qwen3", "input": "Capital of France?"},
     "response": {"id": "resp_1", "object": "response", "status": "completed", "output": [
         {"type": "message", "id": "m", "role": "assistant", "status": "completed", "content": [
             {"type": "output_text", "text": "<think>France → Paris.</think>Paris.", "annotations": []}]}]}},
]


@pytest.fixture(scope="module")
def rows() -> Any:
    return tlmscore.prepare(RECORDS, OFFLINE, pages=MemoryPages({})).set_index("id")


def test_reasoning_is_not_scored(rows: Any) -> None:
    assert rows.loc["deepseek", "response"] == "紀元前7世紀に建設が始まりました。"
    assert rows.loc["qwen-no-open-tag", "response"] == "约两万一千公里。"
    assert rows.loc["responses-api", "response"] == "Paris."
    assert rows.loc["sonar-reasoning", "response"].startswith("عاصمة مصر هي القاهرة.")
    assert not any("think" in r for r in rows.response)
    for rid in ("deepseek", "qwen-no-open-tag", "responses-api", "sonar-reasoning"):
        assert any("<think>" in w for w in rows.loc[rid, "warnings"]), rid
        assert rows.loc[rid, "response_status"] == "completed"


def test_reasoning_is_removed_from_earlier_assistant_turns(rows: Any) -> None:
    prompt = rows.loc["deepseek", "prompt"]
    assert "Assistant: 约两万一千公里。" in prompt
    assert "查一下资料" not in prompt and "think>" not in prompt


def test_answer_cut_off_while_reasoning_has_no_answer(rows: Any) -> None:
    assert rows.loc["cut-while-thinking", "response"] == ""
    assert rows.loc["cut-while-thinking", "response_status"] == "incomplete:max_output_tokens"
    warnings = " ".join(rows.loc["cut-while-thinking", "warnings"])
    assert "cut off inside a <think> block" in warnings and "no answer text" in warnings
    assert "max_output_tokens" in warnings


def test_settings_can_keep_the_reasoning_text() -> None:
    kept = tlmscore.prepare(RECORDS[:1], Settings(offline=True, think="keep"), pages=MemoryPages({}))
    assert kept.response[0].startswith("<think>")


def test_compat_keeps_the_reference_text() -> None:
    reply = {"role": "assistant", "content": "<think>x</think>Paris."}
    assert compat.form_response_string_chat_completions_api(reply) == "<think>x</think>Paris."


def test_command_line_keeps_the_reasoning_when_told(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "deepseek.jsonl"
    source.write_text(json.dumps(RECORDS[0], ensure_ascii=False) + "\n", encoding="utf-8")
    for flag, starts in ((["--think", "keep"], "<think>"), ([], "紀元前7世紀")):
        out = tmp_path / f"out{len(flag)}.jsonl"
        assert main(["prepare", str(source), "-o", str(out), "--offline", "--quiet", "--cache-dir",
                     str(tmp_path / "cache"), *flag]) == 0
        assert json.loads(out.read_text(encoding="utf-8"))["response"].startswith(starts)
    capsys.readouterr()
