"""Differential tests: tlmscore.compat against cleanlab-tlm 1.1.39 on the shapes it formats right."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import strategies as gen
from tlmscore import compat

ref = pytest.importorskip("cleanlab_tlm.utils.chat", reason="cleanlab-tlm is in the dev extra")
Response = pytest.importorskip("openai.types.responses").Response


def _ref(fn: Any, *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _warned_last(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, bool]:
    """What `fn` returns, and whether it warned that the prompt ends with an answer (a tool call or assistant turn)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    return result, any(str(w.message) == compat.LAST_MESSAGE_WARNING for w in caught)


def _same_prompt(messages: Any, tools: Any, **kwargs: Any) -> None:
    """compat gives the reference's prompt, and warns about the last message exactly when the reference does."""
    assert _warned_last(compat.form_prompt_string, messages, tools, **kwargs) == _warned_last(
        ref.form_prompt_string, messages, tools, **kwargs)


WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": True}
HAND_PICKED = [
    ([{"role": "user", "content": "Just one question?"}], None, {}),
    ([{"role": "user", "content": "  padded  "}], [WEATHER], {}),
    ([{"role": "user", "content": "hi"}], None, {"instructions": "Be brief."}),
    ([{"role": "system", "content": "s"}, {"role": "developer", "content": "d"}, {"role": "user", "content": "u"}],
     [WEATHER, {"type": "file_search"}, {"type": "web_search"}], {"instructions": "i"}),
    ([{"role": "user", "content": "Weather in Zürich?"},
      {"type": "function_call", "name": "get_weather", "arguments": '{"city": "Zürich"}', "call_id": "c1"},
      {"type": "function_call_output", "call_id": "c1", "output": '{"temp_c": 21, "sky": "klar ☀"}'},
      {"role": "assistant", "content": "It is 21 °C."}, {"role": "user", "content": "And tomorrow?"}],
     [WEATHER], {}),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"},
      {"role": "assistant", "content": "d"}], None, {}),
    ([{"role": "user", "content": "x"}, {"type": "function_call", "name": "f", "arguments": "", "call_id": "1"},
      {"type": "function_call", "name": "g", "arguments": "{}", "call_id": "2"},
      {"type": "function_call_output", "call_id": "1", "output": "one"},
      {"type": "function_call_output", "call_id": "2", "output": "two"}], [], {}),
    ([{"role": "user", "name": "alice", "content": "named"}, {"role": "assistant", "content": "ok"}], None, {}),
    ([{"role": "user", "content": "q"}, {"type": "reasoning", "id": "rs_1", "summary": []},
      {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "1"},
      {"type": "function_call_output", "call_id": "1", "output": "r"}], None, {}),
]


@pytest.mark.parametrize(("messages", "tools", "kwargs"), HAND_PICKED)
def test_hand_picked_responses_prompts_match(messages: list[dict[str, Any]], tools: Any,
                                             kwargs: dict[str, Any]) -> None:
    _same_prompt(messages, tools, **kwargs)


def test_hand_picked_with_response_object_matches() -> None:
    output = [gen.output_message(["First part.", "Second part."])]
    fs = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["policy"],
          "results": [{"attributes": {"page": 2.5}, "file_id": "file-1", "filename": "p.pdf", "score": 0.9,
                       "text": "Leave is 25 days."}]}
    body = {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4.1", "output": [fs, *output],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    response = Response.model_validate(body)
    messages = [{"role": "user", "content": "How much leave?"}]
    tools = [{"type": "file_search", "vector_store_ids": ["vs"]}]
    expected = _ref(ref.form_prompt_string, messages, tools, use_responses=True, response=response)
    assert compat.form_prompt_string(messages, tools, use_responses=True, response=response) == expected
    assert compat.form_prompt_string(messages, tools, response=body) == expected
    assert compat.form_response_string_responses_api(response) == _ref(
        ref.form_response_string_responses_api, response)


CHAT_TOOL = {"type": "function", "function": {"name": "lookup", "description": "Look up an order",
                                              "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("tools", [None, [CHAT_TOOL]])
def test_hand_picked_chat_completions_match(tools: Any) -> None:
    messages = [
        {"role": "system", "content": "You are support."},
        {"role": "user", "content": "Where is order 42?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 42}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "shipped"},
        {"role": "assistant", "content": "It shipped."},
        {"role": "system", "content": "late system"},
        {"role": "user", "name": "bob", "content": "thanks"},
    ]
    _same_prompt(messages, tools)


def test_chat_response_string_matches() -> None:
    message = {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": 42}'}},
        {"id": "t2", "type": "function", "function": {"name": "track", "arguments": ""}}]}
    assert compat.form_response_string_chat_completions_api(message) == _ref(
        ref.form_response_string_chat_completions_api, message)


def test_use_responses_false_with_kwargs_raises_like_reference() -> None:
    with pytest.raises(ValueError, match="only supported in Responses API format"):
        compat.form_prompt_string([{"role": "user", "content": "x"}], use_responses=False, instructions="i")


COMPARE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@COMPARE
@given(messages=gen.responses_messages(), tools=st.none() | gen.responses_tools,
       instructions=st.none() | gen.text)
def test_generated_responses_prompts_match(messages: list[dict[str, Any]], tools: Any,
                                           instructions: str | None) -> None:
    kwargs = {} if instructions is None else {"instructions": instructions}
    _same_prompt(messages, tools, use_responses=True, **kwargs)


@COMPARE
@given(messages=gen.responses_messages(), tools=st.none() | gen.responses_tools, body=gen.response_dict())
def test_generated_responses_with_response_match(messages: list[dict[str, Any]], tools: Any,
                                                 body: dict[str, Any]) -> None:
    response = Response.model_validate(body)
    _same_prompt(messages, tools, use_responses=True, response=response)
    assert compat.form_response_string_responses_api(response) == _ref(
        ref.form_response_string_responses_api, response)


@COMPARE
@given(messages=gen.chat_messages(), tools=st.none() | st.lists(gen.chat_tool(), max_size=3))
def test_generated_chat_prompts_match(messages: list[dict[str, Any]], tools: Any) -> None:
    _same_prompt(messages, tools, use_responses=False)


def test_generated_examples_exercise_every_item_kind() -> None:
    """The strategy must keep producing each item type the comparison is meant to cover."""
    seen: set[str] = set()

    @settings(max_examples=200, deadline=None)
    @given(gen.responses_messages())
    def collect(messages: list[dict[str, Any]]) -> None:
        seen.update(str(m.get("type", m.get("role"))) for m in messages)

    collect()
    assert {"function_call", "function_call_output", "file_search_call", "user", "assistant", "message"} <= seen
