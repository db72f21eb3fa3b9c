# ruff: noqa: RUF001  (Chinese and Japanese text uses full-width punctuation, as written)
"""A call's instructions: the request's, else the Response's (stored prompt templates); the prompt reference."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses import Response

import tlmscore
from tlmscore import MemoryPages, Settings

OFFLINE = Settings(offline=True)
ANSWER = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
          "content": [{"type": "output_text", "text": "东京今天晴。", "annotations": []}]}
PROMPT = {"id": "pmpt_68a1", "version": "4", "variables": {
    "city": "東京", "manual": {"type": "input_file", "file_id": "file-9", "filename": "手册.pdf"}}}


def response(**fields: Any) -> dict[str, Any]:
    """A `Response` as the SDK dumps it (instructions and prompt in their real shapes)."""
    body = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5", "status": "completed",
            "output": [ANSWER], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], **fields}
    return Response.model_validate(body).model_dump(mode="json")


def prepare(*records: dict[str, Any]) -> Any:
    return tlmscore.prepare(list(records), OFFLINE, pages=MemoryPages({})).set_index("id")


def test_null_request_instructions_do_not_hide_the_responses_own() -> None:
    rows = prepare({"id": "r", "request": {"model": "gpt-5", "input": "天气？", "instructions": None},
                    "response": response(instructions="只用中文回答。")})
    assert rows.loc["r", "prompt"] == "System: 只用中文回答。\n\nUser: 天气？\n\nAssistant:"


def test_request_instructions_win_over_the_responses_echo() -> None:
    rows = prepare({"id": "r", "request": {"model": "gpt-5", "input": "天气？", "instructions": "Be brief."},
                    "response": response(instructions="Be brief.")})
    assert rows.loc["r", "prompt"].startswith("System: Be brief.\n\nUser: 天气？")


def test_stored_prompt_shows_its_reference_and_the_expanded_template_items() -> None:
    template = [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "あなたは天気予報士です。"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "都市: 東京"}]},
    ]
    rows = prepare({"id": "r", "request": {"model": "gpt-5", "prompt": PROMPT, "instructions": None,
                                           "input": "今日は？"},
                    "response": response(instructions=template, prompt=PROMPT)})
    prompt = rows.loc["r", "prompt"]
    assert prompt == (
        'System: Stored prompt pmpt_68a1 (version 4), with variables: {"city": "東京", '
        '"manual": "[file: 手册.pdf, file-9]"}\n\nあなたは天気予報士です。\n\n'
        "User: 都市: 東京\n\n今日は？\n\nAssistant:")
    assert rows.loc["r", "warnings"] == []


def test_stored_prompt_without_logged_instructions_is_named_with_a_warning() -> None:
    rows = prepare({"id": "r", "request": {"model": "gpt-5", "prompt": {"id": "pmpt_1"}, "input": "Hi"},
                    "response": response()})
    assert rows.loc["r", "prompt"].startswith("System: Stored prompt pmpt_1\n\nUser: Hi")
    assert any("pmpt_1" in w and "unknown" in w for w in rows.loc["r", "warnings"])


def test_stored_prompt_string_instructions_follow_the_reference() -> None:
    rows = prepare({"id": "r", "request": {"model": "gpt-5", "input": "Hi"},
                    "response": response(instructions="Answer in Arabic: مرحبا", prompt={"id": "pmpt_2"})})
    expected = "System: Stored prompt pmpt_2\n\nAnswer in Arabic: مرحبا\n\nUser: Hi\n\nAssistant:"
    assert rows.loc["r", "prompt"] == expected


@pytest.mark.parametrize("instructions", [None, "Reply briefly."])
def test_follow_up_shows_only_its_own_recorded_instructions(instructions: str | None) -> None:
    first = {"id": "a", "request": {"model": "gpt-5", "input": "One", "instructions": "First call's rules."},
             "response": response(id="resp_a", instructions="First call's rules.")}
    second = {"id": "b", "request": {"model": "gpt-5", "input": "Two", "previous_response_id": "resp_a",
                                     "instructions": None},
              "response": response(id="resp_b", instructions=instructions)}
    prompt = prepare(first, second).loc["b", "prompt"]
    assert "First call's rules." not in prompt
    assert prompt.startswith("System: Reply briefly.") == (instructions is not None)
