"""Provider shapes that tell a scorer something the model never saw, or put non-answer text in the answer.

Each record is written from the providers' documented shapes: the `openai` SDK's Response types
(validated below: `phase` on messages, programmatic tool calling's `program` item, `caller` and
`allowed_callers`), Mistral's `ThinkChunk` (`{"type": "thinking", "thinking": [text chunks]}`),
DeepSeek's `reasoning_content`, OpenRouter's `reasoning`, and xAI's server-side tool functions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import Response

import tlmscore
from tlmscore.convert import SEARCH_NOT_LOGGED, UNCITED
from tlmscore.rendering._shown import SHOWN_ABOVE

OFFLINE = tlmscore.Settings(offline=True)


def row(record: dict[str, Any], settings: tlmscore.Settings = OFFLINE) -> dict[str, Any]:
    out = {str(k): v for k, v in tlmscore.prepare([record], settings).to_dict("records")[0].items()}
    assert out["error"] is None, out["error"]
    return out


def response(output: list[dict[str, Any]], rid: str = "resp_1", model: str = "gpt-5.4-2026-03-05",
             *, sdk_shape: bool = True) -> dict[str, Any]:
    value = {"id": rid, "object": "response", "created_at": 1767225600, "status": "completed", "model": model,
             "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    if sdk_shape:
        Response.model_validate(value)  # the SDK's own type accepts it
    return value


def message(text: str, annotations: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", **extra,
            "content": [{"type": "output_text", "text": text, "annotations": annotations or []}]}


def url_cite(text: str, marker: str, url: str) -> dict[str, Any]:
    start = text.index(marker)
    return {"type": "url_citation", "url": url, "title": "T", "start_index": start, "end_index": start + len(marker)}


def tool_calls(text: str) -> list[dict[str, Any]]:
    """The tool call blocks of a prompt (after the tools section's example) or of a response."""
    body = text.rsplit("should be ignored.", maxsplit=1)[-1]
    return [json.loads(part.split("\n</tool_call>")[0]) for part in body.split("<tool_call>\n")[1:]]


def tool_responses(prompt: str) -> list[dict[str, Any]]:
    return [json.loads(part.split("\n</tool_response>")[0]) for part in prompt.split("<tool_response>\n")[1:]]


# -- 1. a search whose results were not logged ---------------------------------------------------------------


@pytest.mark.parametrize("call", [
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},  # no action at all (Azure, DeepSeek)
])
def test_a_search_with_unlogged_results_says_they_are_unknown_not_empty(call: dict[str, Any]) -> None:
    # a call without `action` is what Azure and DeepSeek log; the SDK's type demands one
    out = row({"request": {"input": "Who won?"}, "response": response([call, message("Team A won.")],
                                                                      sdk_shape="action" in call)})
    [result] = tool_responses(out["prompt"])
    assert result["output"] == SEARCH_NOT_LOGGED
    assert "unknown" in result["output"]


def test_a_search_that_logged_no_sources_found_nothing_only_when_it_logged_an_empty_list() -> None:
    call = {"type": "web_search_call", "id": "ws_1", "status": "completed",
            "action": {"type": "search", "query": "q", "sources": []}}
    out = row({"request": {"input": "Who won?"}, "response": response([call, message("Nobody knows.")])})
    assert tool_responses(out["prompt"])[0]["output"] == []


# -- 2. provider reasoning --------------------------------------------------------------------------------------


def chat(message_: dict[str, Any], model: str) -> dict[str, Any]:
    return {"request": {"model": model, "messages": [{"role": "user", "content": "What is 17 * 23?"}]},
            "response": {"id": "c1", "object": "chat.completion", "created": 1, "model": model,
                         "choices": [{"index": 0, "finish_reason": "stop", "message": message_}]}}


def test_mistral_thinking_parts_are_not_the_answer() -> None:
    content = [{"type": "thinking", "thinking": [{"type": "text", "text": "17 * 23 = 340 + 51 = 391"}]},
               {"type": "text", "text": "391"}]
    out = row(chat({"role": "assistant", "content": content}, "magistral-medium-2509"))
    assert out["response"] == "391"
    assert "340" not in out["prompt"]
    assert any("reasoning" in w for w in out["warnings"])


def test_thinking_parts_are_kept_as_think_text_with_think_keep() -> None:
    content = [{"type": "thinking", "thinking": [{"type": "text", "text": "carry the one"}]},
               {"type": "text", "text": "391"}]
    kept = row(chat({"role": "assistant", "content": content}, "magistral-small-2509"),
               tlmscore.Settings(offline=True, think="keep"))
    assert kept["response"] == "<think>carry the one</think>\n391"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields_of_deepseek_and_openrouter_are_not_shown_and_are_warned_about(field: str) -> None:
    out = row(chat({"role": "assistant", "content": "391", field: "Seventeen times twenty-three."}, "deepseek-r1"))
    assert out["response"] == "391"
    assert "Seventeen" not in out["prompt"]
    assert any(repr(field) in w for w in out["warnings"])


def test_an_unknown_content_part_is_warned_about() -> None:
    content = [{"type": "reference", "reference_ids": [1]}, {"type": "text", "text": "391"}]
    out = row(chat({"role": "assistant", "content": content}, "mistral-medium-latest"))
    assert any("unknown type 'reference'" in w for w in out["warnings"])


# -- 3. xAI's server-side tools in streamed responses --------------------------------------------------------


def test_xai_streamed_x_search_is_a_server_tool_with_the_cited_posts() -> None:
    post = "https://x.com/nasa/status/1"
    text = "NASA posted about the launch [[1]](https://x.com/nasa/status/1)."
    call = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "xs_1", "name": "x_keyword_search",
            "input": json.dumps({"query": "NASA launch", "limit": 5}), "status": "completed"}
    out = row({"request": {"model": "grok-4", "input": "What did NASA post?", "tools": [{"type": "x_search"}]},
               "response": response([call, message(text, [url_cite(text, "[[1]](https://x.com/nasa/status/1)",
                                                                    post)])], model="grok-4")})
    [call_block] = tool_calls(out["prompt"])
    assert call_block["arguments"] == {"query": "NASA launch", "limit": 5}  # not a JSON string in `input`
    assert "Free-form text input" not in out["prompt"]
    [result] = tool_responses(out["prompt"])
    assert [page["url"] for page in result["output"]] == [post]
    assert "where the model found them is not known" not in out["prompt"]


def test_xai_streamed_browse_page_and_code_execution_are_server_tools() -> None:
    browse = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "b1", "name": "browse_page",
              "input": json.dumps({"url": "https://example.org/a", "instructions": "find the date"}),
              "status": "completed"}
    code = {"type": "custom_tool_call", "id": "ctc_2", "call_id": "c1", "name": "code_execution",
            "input": json.dumps({"code": "print(2 + 2)"}), "status": "completed"}
    out = row({"request": {"model": "grok-4", "input": "Date?"},
               "response": response([browse, code, message("It is 4.")], model="grok-4")})
    names = [c["name"] for c in tool_calls(out["prompt"])]
    assert names == ["open_page", "code_interpreter"]
    assert out["response"] == "It is 4."


def test_a_client_custom_tool_of_the_same_name_stays_a_client_tool() -> None:
    call = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "w1", "name": "web_search",
            "input": json.dumps({"query": "x"})}
    out = row({"request": {"input": "Go", "tools": [{"type": "custom", "name": "web_search"}]},
               "response": response([call])})
    assert '"input": "{\\"query\\": \\"x\\"}"' in out["response"]


# -- 4. --urls cited: sources only when the answer cites nothing ------------------------------------------------


def _search(call_id: str, urls: list[str]) -> dict[str, Any]:
    return {"type": "web_search_call", "id": call_id, "status": "completed",
            "action": {"type": "search", "query": "q", "sources": [{"type": "url", "url": u} for u in urls]}}


def test_an_answer_that_cites_gets_only_its_cited_pages() -> None:
    sources = [f"https://example.org/{i}" for i in range(33)]
    text = "The fact holds ([example.org](https://example.org/7))."
    answer = message(text, [url_cite(text, "([example.org](https://example.org/7))", sources[7])])
    out = row({"request": {"input": "Q?"}, "response": response([_search("ws_1", sources[:20]),
                                                                 _search("ws_2", sources[20:]), answer])})
    assert out["n_urls"] == 1
    first, second = tool_responses(out["prompt"])
    assert [p["url"] for p in first["output"]] == [sources[7]]
    assert second["output"] == UNCITED.format(n=13)


def test_an_answer_that_cites_nothing_gets_every_source() -> None:
    sources = [f"https://example.org/{i}" for i in range(3)]
    out = row({"request": {"input": "Q?"}, "response": response([_search("ws_1", sources), message("Yes.")])})
    assert out["n_urls"] == 3


# -- 5. phase ---------------------------------------------------------------------------------------------------


def test_commentary_is_an_earlier_turn_and_the_final_answer_is_scored() -> None:
    out = row({"request": {"input": "Is the bridge open today?"}, "response": response([
        message("I'll check the traffic sources first.", phase="commentary", id="msg_0"),
        message("Yes, the bridge is open today.", phase="final_answer")])})
    assert out["response"] == "Yes, the bridge is open today."
    assert out["prompt"].endswith("Assistant: I'll check the traffic sources first.\n\nAssistant:")


def test_commentary_alone_is_still_the_answer() -> None:
    out = row({"request": {"input": "Hi"}, "response": response([message("Working on it.", phase="commentary")])})
    assert out["response"] == "Working on it."


# -- 6. calls made by a program ------------------------------------------------------------------------------


PROGRAM = {"type": "program", "id": "pg_1", "call_id": "call_prog", "fingerprint": "fp",
           "code": "const o = await tools.get_orders({}); text(String(o.length));"}
TOOLS = [{"type": "programmatic_tool_calling"},
         {"type": "function", "name": "get_orders", "description": "The user's orders.",
          "parameters": {"type": "object", "properties": {}}, "allowed_callers": ["programmatic"]}]


def test_calls_a_program_made_are_steps_of_its_run_not_the_models_calls() -> None:
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_orders", "name": "get_orders",
            "arguments": "{}", "caller": {"type": "program", "caller_id": "call_prog"}}
    out = row({"request": {"input": "How many orders?", "tools": TOOLS}, "response": response([PROGRAM, call])})
    assert [c["name"] for c in tool_calls(out["response"])] == ["program"]
    [step] = tool_responses(out["response"])
    assert step == {"name": "program", "call_id": "call_prog",
                    "output": {"program_called": "get_orders", "arguments": {}, "call_id": "call_orders"}}


def test_a_program_only_tool_is_declared_as_such_and_its_output_went_to_the_program() -> None:
    history = [{"role": "user", "content": "How many orders?"}, PROGRAM,
               {"type": "function_call", "call_id": "call_orders", "name": "get_orders", "arguments": "{}",
                "caller": {"type": "program", "caller_id": "call_prog"}},
               {"type": "function_call_output", "call_id": "call_orders", "output": "[1, 2, 3]"}]
    out = row({"request": {"input": history, "tools": TOOLS}, "response": response([
        {"type": "program_output", "id": "po_1", "call_id": "call_prog", "result": "3", "status": "completed"},
        message("You have 3 orders.")])})
    declared = [json.loads(line) for line in out["prompt"].split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
    orders = next(d for d in declared if d["name"] == "get_orders")
    assert orders["allowed_callers"] == ["programmatic"] and "Only a program" in orders["description"]
    steps = [r for r in tool_responses(out["prompt"]) if r["name"] == "program"]
    assert steps[1]["output"] == {"returned_to_program": "[1, 2, 3]", "from": "get_orders", "call_id": "call_orders"}


def test_a_tool_callable_directly_is_declared_as_the_reference_does() -> None:
    tools = [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"},
              "allowed_callers": ["direct", "programmatic"]}]
    out = row({"request": {"input": "x", "tools": tools}, "response": response([message("y")])})
    assert '{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true}' in \
        out["prompt"]


# -- 8. small ones ----------------------------------------------------------------------------------------------


def test_an_empty_developer_message_leaves_no_blank_lines() -> None:
    out = row({"request": {"instructions": "Be brief.", "input": [{"role": "developer", "content": ""},
                                                                   {"role": "user", "content": "Hi"}]},
               "response": response([message("Hello.")])})
    assert "\n\n\n" not in out["prompt"]
    assert out["prompt"] == "System: Be brief.\n\nUser: Hi\n\nAssistant:"


def test_a_file_part_is_named_once() -> None:
    content = [{"type": "input_text", "text": "Summarize"}, {"type": "input_file", "file_id": "file-abc123"}]
    out = row({"request": {"input": [{"role": "user", "content": content}]}, "response": response([message("Ok.")])})
    assert "[file: file-abc123]" in out["prompt"]


def test_a_bare_response_says_its_request_is_missing() -> None:
    out = row(response([message("Paris.")]))
    assert out["history_complete"] is False
    assert any("no request" in w for w in out["warnings"])
    assert row({"request": {"input": "Capital?"}, "response": response([message("Paris.")])})["history_complete"]


def test_a_page_two_searches_list_is_shown_once_and_counted_once() -> None:
    url = "https://example.org/page"
    text = "It holds ([example.org](https://example.org/page))."
    answer = message(text, [url_cite(text, "([example.org](https://example.org/page))", url)])
    record = {"request": {"input": "Q?"}, "response": response([_search("ws_1", [url]), _search("ws_2", [url]),
                                                                  answer])}
    pages = tlmscore.MemoryPages([tlmscore.Page(url=url, status="ok", text="The page text, shown in full.")])
    out = tlmscore.prepare([record], OFFLINE, pages=pages).to_dict("records")[0]
    assert out["n_urls"] == 1
    first, second = tool_responses(out["prompt"])
    assert first["output"][0]["content"] == "The page text, shown in full."
    assert second["output"] == [{"url": url, "content": SHOWN_ABOVE}]
    assert out["prompt"].count("The page text, shown in full.") == 1


def test_a_custom_tool_a_program_called_is_a_step_of_its_run_and_declared_program_only() -> None:
    tools = [{"type": "programmatic_tool_calling"},
             {"type": "custom", "name": "sql", "description": "Run SQL.", "allowed_callers": ["programmatic"]}]
    call = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_sql", "name": "sql",
            "input": "SELECT count(*) FROM orders", "caller": {"type": "program", "caller_id": "call_prog"}}
    out = row({"request": {"input": "Count orders", "tools": tools}, "response": response([PROGRAM, call])})
    assert [c["name"] for c in tool_calls(out["response"])] == ["program"]
    assert tool_responses(out["response"])[0]["output"]["program_called"] == "sql"
    declared = [json.loads(line) for line in out["prompt"].split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
    assert next(d for d in declared if d["name"] == "sql")["allowed_callers"] == ["programmatic"]


def test_a_response_that_is_only_a_call_its_program_made_answers_with_that_step() -> None:
    call = {"type": "function_call", "id": "fc_2", "call_id": "call_stock", "name": "get_orders", "arguments": "{}",
            "status": "in_progress", "caller": {"type": "program", "caller_id": "call_prog"}}
    out = row({"request": {"input": [{"role": "user", "content": "How many orders?"}, PROGRAM], "tools": TOOLS},
               "response": response([call])})
    assert tool_calls(out["response"]) == []
    assert tool_responses(out["response"])[0]["output"]["program_called"] == "get_orders"


def _chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"request": {"model": "gpt-4o-mini", "messages": messages},
            "response": {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi."},
                                      "finish_reason": "stop"}]}}


@pytest.mark.parametrize("user", [{"role": "user"}, {"role": "user", "content": None},
                                  {"role": "user", "content": ""}, {"role": "user", "content": []}])
def test_a_chat_message_without_content_is_warned_about(user: dict[str, Any], tmp_path: Path) -> None:
    out = row(_chat([user]))
    assert out["prompt"] == "" and out["warnings"] == ["message 1 (user) has no content: the prompt shows nothing "
                                                       "of it"]
    assert not row(_chat([{"role": "user", "content": "Hello"}]))["warnings"]
    path = tmp_path / "rows.csv"  # read back from CSV, the row still says why its prompt is empty
    tlmscore.prepare([_chat([user])], OFFLINE).to_csv(path, index=False)
    import pandas as pd

    assert "has no content" in str(pd.read_csv(path)["warnings"][0])


def test_the_files_an_answer_cites_are_named_in_a_column(demo_path: Path) -> None:
    frame = tlmscore.prepare(demo_path, OFFLINE)
    by_id = dict(zip(frame["id"], frame["cited_files"], strict=True))
    assert list(by_id["hr-file-search-results"]) == ["parental-leave-policy-2025.pdf", "employee-handbook-2025.pdf"]
    assert list(by_id["hr-file-search-no-results"]) == ["file-rBCnLJYV5igvgjl3Od991s"]  # no results: its id
    assert list(by_id["web-search-jwst-sources"]) == []
    assert all(list(files) == [] for files in frame["cited_files"][frame["error"].notna()])  # error rows too
    assert list(frame.columns).index("cited_files") == tlmscore.output.ROW_COLUMNS.index("cited_files")
    cited = frame[frame["id"] == "hr-file-search-results"].iloc[0].to_dict()
    record = tlmscore.output.Row.from_record(cited).to_record()
    assert record["cited_files"] == ["parental-leave-policy-2025.pdf", "employee-handbook-2025.pdf"]


@pytest.mark.parametrize("given", [{"input": ""}, {"input": []}, {"input": [{"role": "user", "content": []}]},
                                   {"model": "gpt-5.4"}])
def test_a_request_with_empty_input_is_warned_about(given: dict[str, Any]) -> None:
    out = row({"request": given, "response": response([message("Hello.")])})
    assert out["warnings"] == ["the request's input is empty: the prompt shows nothing the model was asked"]
    assert not row({"request": {"instructions": "Be kind."}, "response": response([message("Hello.")])})["warnings"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["system", "developer", "user", "assistant"]),
                          st.sampled_from([None, "", " ", [], "Hello there."])), min_size=1, max_size=4))
def test_no_chat_record_renders_an_empty_prompt_silently(messages: list[tuple[str, Any]]) -> None:
    record = _chat([{"role": role, "content": content} for role, content in messages])
    out = {str(k): v for k, v in tlmscore.prepare([record], OFFLINE).to_dict("records")[0].items()}
    assert out["error"] is None
    assert out["prompt"].strip() or out["warnings"]
