# ruff: noqa: RUF001  (Chinese and Japanese text uses full-width punctuation, as written)
"""Unicode in JSON blocks: kept by tlmscore's own rendering, escaped by `tlmscore.compat` as the reference does."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

import tlmscore
from tlmscore import MemoryPages, Settings, compat
from tlmscore.convert import convert_chat, convert_items
from tlmscore.rendering import render_prompt, render_response

ZH_QUERY = "北京今天的天气怎么样？"
JA_OUTPUT = "東京は晴れ、最高気温は二十三度です。"
AR_ARGS = {"city": "القاهرة", "note": "درجة الحرارة بالمئوية"}
AR_TEXT = "الطقس في القاهرة مشمس."

WEATHER = {"type": "function", "name": "get_weather", "description": "天気予報を取得する",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}

FUNCTION_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": ZH_QUERY},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
     "arguments": json.dumps({"city": "北京"}), "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": JA_OUTPUT},
    {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "get_weather",
     "arguments": json.dumps(AR_ARGS), "status": "completed"},
]


def escaped(text: str) -> str:
    """How `json.dumps` with its default `ensure_ascii=True` writes `text` (without the quotes)."""
    return json.dumps(text)[1:-1]


def test_own_rendering_keeps_unicode_in_calls_outputs_tools_and_the_scored_call() -> None:
    conv = convert_items(FUNCTION_ITEMS, answer_start=3, tools=[WEATHER])
    prompt, response = render_prompt(conv), render_response(conv)
    assert '"city": "北京"' in prompt
    assert f'"output": "{JA_OUTPUT}"' in prompt
    assert "天気予報を取得する" in prompt
    assert '"city": "القاهرة"' in response and AR_ARGS["note"] in response
    assert "\\u" not in prompt + response


def test_compat_escapes_non_ascii_as_the_reference_does() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prompt = compat.form_prompt_string(FUNCTION_ITEMS[:3], [WEATHER])
    assert escaped("北京") in prompt and escaped(JA_OUTPUT) in prompt and escaped("天気予報を取得する") in prompt
    assert "北京" in prompt.split("Assistant:")[0]  # message text is not JSON: left as it is
    assert "東京" not in prompt


def test_compat_matches_the_reference_bytes_on_non_ascii_tool_use() -> None:
    ref = pytest.importorskip("cleanlab_tlm.utils.chat", reason="cleanlab-tlm is in the dev extra")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for items in (FUNCTION_ITEMS[:3], FUNCTION_ITEMS):
            assert compat.form_prompt_string(items, [WEATHER]) == ref.form_prompt_string(items, [WEATHER])
        chat = [{"role": "user", "content": ZH_QUERY},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "t1", "type": "function", "function": {
                    "name": "get_weather", "arguments": json.dumps(AR_ARGS, ensure_ascii=False)}}]},
                {"role": "tool", "tool_call_id": "t1", "content": JA_OUTPUT},
                {"role": "user", "content": "そして明日は？"}]
        tools = [{"type": "function", "function": {"name": "get_weather", "description": "天気", "parameters": {}}}]
        assert compat.form_prompt_string(chat, tools) == ref.form_prompt_string(chat, tools)
        message = chat[1]
        assert compat.form_response_string_chat_completions_api(message) == \
            ref.form_response_string_chat_completions_api(message)


def test_chat_format_keeps_unicode_in_tool_calls_and_tool_messages() -> None:
    messages = [{"role": "user", "content": ZH_QUERY},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function", "function": {
                    "name": "get_weather", "arguments": json.dumps({"city": "北京"})}}]},
                {"role": "tool", "tool_call_id": "t1", "content": JA_OUTPUT}]
    answer = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "t2", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(AR_ARGS)}}]}
    conv = convert_chat(messages, answer=answer)
    assert '"city": "北京"' in render_prompt(conv) and JA_OUTPUT in render_prompt(conv)
    assert '"city": "القاهرة"' in render_response(conv)


def response(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5", "output": output}


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


BUILT_IN_RECORDS = [
    {"id": "file-search-zh", "request": {"model": "gpt-5", "input": "年假有多少天？",
                                         "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]},
     "response": response([
         {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["年假 天数"],
          "results": [{"file_id": "file-1", "filename": "员工手册.pdf", "score": 0.91, "attributes": {},
                       "text": "正式员工每年享有二十五天带薪年假。"}]},
         message("正式员工每年有二十五天年假。")])},
    {"id": "mcp-ar", "request": {"model": "gpt-5", "input": "ما هي عاصمة مصر؟", "tools": [
        {"type": "mcp", "server_label": "atlas", "server_url": "https://atlas.example/mcp",
         "require_approval": "never"}]},
     "response": response([
         {"type": "mcp_call", "id": "mcp_1", "server_label": "atlas", "name": "lookup",
          "arguments": json.dumps({"سؤال": "عاصمة مصر"}), "output": "عاصمة مصر هي القاهرة.", "error": None},
         message(AR_TEXT)])},
    {"id": "custom-ja", "request": {"model": "gpt-5", "input": [
        {"role": "user", "content": "挨拶を書いて"},
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "writer", "input": "こんにちは"},
        {"type": "custom_tool_call_output", "call_id": "call_c", "output": "「こんにちは」と書きました。"}],
        "tools": [{"type": "custom", "name": "writer", "description": "文章を書く"}]},
     "response": response([message("書きました。")])},
]


def test_built_in_tool_blocks_keep_chinese_arabic_and_japanese() -> None:
    df = tlmscore.prepare(BUILT_IN_RECORDS, Settings(offline=True), pages=MemoryPages({})).set_index("id")
    assert df.error.isna().all(), df.error.dropna().tolist()
    file_search = df.loc["file-search-zh", "prompt"]
    assert "年假 天数" in file_search and "员工手册.pdf" in file_search
    assert "正式员工每年享有二十五天带薪年假。" in file_search
    mcp = df.loc["mcp-ar", "prompt"]
    assert "عاصمة مصر هي القاهرة." in mcp and '"سؤال": "عاصمة مصر"' in mcp
    custom = df.loc["custom-ja", "prompt"]
    assert "こんにちは" in custom and "「こんにちは」と書きました。" in custom and "文章を書く" in custom
    assert not any("\\u" in p for p in df.prompt)


def test_text_that_is_not_valid_unicode_is_escaped_not_lost() -> None:
    items = [{"role": "user", "content": "x"},
             {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"s": "\\ud800 北京"}'}]
    conv = convert_items(items, answer_start=1)
    rendered = render_response(conv)
    rendered.encode("utf-8")  # a lone surrogate cannot be written as UTF-8: that block is escaped
    assert "\\ud800" in rendered and escaped("北京") in rendered
