"""Hypothesis strategies for conversations in the shapes cleanlab-tlm formats correctly."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
names = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(names, children, max_size=3),
    max_leaves=6,
)


@st.composite
def function_tool(draw: st.DrawFn) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "type": "function",
        "name": draw(names),
        "description": draw(text),
        "parameters": {"type": "object", "properties": draw(st.dictionaries(names, st.just({"type": "string"}),
                                                                           max_size=3))},
    }
    if draw(st.booleans()):
        tool["strict"] = draw(st.booleans())
    return tool


responses_tools = st.lists(
    st.one_of(function_tool(), st.just({"type": "file_search", "vector_store_ids": ["vs_1"]}),
              st.just({"type": "web_search"})),
    max_size=4,
)


def output_message(texts: list[str]) -> dict[str, Any]:
    return {"type": "message", "id": "msg_x", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []} for t in texts]}


@st.composite
def message_item(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "system", "developer"]))
    if role == "assistant" and draw(st.booleans()):
        return output_message(draw(st.lists(text, min_size=1, max_size=3)))
    return {"role": role, "content": draw(text)}


@st.composite
def file_search_item(draw: st.DrawFn) -> dict[str, Any]:
    result = st.fixed_dictionaries({
        "attributes": st.dictionaries(names, st.one_of(text, st.integers(0, 9)), max_size=2),
        "file_id": st.from_regex(r"file-[A-Za-z0-9]{6}", fullmatch=True),
        "filename": names.map(lambda n: n + ".pdf"),
        "score": st.floats(0, 1, allow_nan=False),
        "text": text,
    })
    return {"type": "file_search_call", "id": draw(st.from_regex(r"fs_[a-f0-9]{8}", fullmatch=True)),
            "status": "completed", "queries": draw(st.lists(text, min_size=1, max_size=3)),
            "results": draw(st.lists(result, max_size=3))}


@st.composite
def function_pair(draw: st.DrawFn, call_id: str) -> list[dict[str, Any]]:
    name = draw(names)
    args = draw(st.dictionaries(names, json_values, max_size=3))
    call = {"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": call_id}
    output = {"type": "function_call_output", "call_id": call_id, "output": draw(text)}
    return [call, output]


@st.composite
def responses_messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["message", "message", "pair", "file_search"]))
        if kind == "message":
            items.append(draw(message_item()))
        elif kind == "pair":
            items.extend(draw(function_pair(f"call_{n}")))
        else:
            items.append(draw(file_search_item()))
    return items


@st.composite
def response_dict(draw: st.DrawFn) -> dict[str, Any]:
    context = draw(st.lists(st.one_of(file_search_item(), st.builds(lambda t: output_message([t]), text)),
                            max_size=2))
    if context and context[-1]["type"] == "message":
        context.append(draw(file_search_item()))
    if draw(st.integers(0, 3)) == 0:
        final: dict[str, Any] = {"type": "function_call", "id": "fc_1", "call_id": "call_final",
                                 "name": draw(names), "status": "completed",
                                 "arguments": json.dumps(draw(st.dictionaries(names, json_values, max_size=2)))}
    else:
        final = output_message(draw(st.lists(text, min_size=1, max_size=2)))
    return {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4.1",
            "output": [*context, final], "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


@st.composite
def chat_tool(draw: st.DrawFn) -> dict[str, Any]:
    return {"type": "function", "function": {"name": draw(names), "description": draw(text),
                                             "parameters": {"type": "object", "properties": {}}}}


@st.composite
def chat_messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 6))):
        role = draw(st.sampled_from(["system", "developer", "user", "assistant", "assistant_tools"]))
        if role == "assistant_tools":
            call_id = f"call_{n}"
            args = json.dumps(draw(st.dictionaries(names, json_values, max_size=2)))
            messages.append({"role": "assistant", "content": draw(st.none() | text),
                             "tool_calls": [{"id": call_id, "type": "function",
                                             "function": {"name": draw(names), "arguments": args}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": draw(text)})
        else:
            messages.append({"role": role, "content": draw(text)})
    return messages
