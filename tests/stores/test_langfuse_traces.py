"""Langfuse traces as Langfuse gives them, and generations as agent frameworks' integrations store them.

`fixtures/traces/langfuse/` holds made-up traces in the shapes Langfuse's public API, its UI's "Download
trace" and its web API give (`{trace, observations}`; input, output and metadata as values or JSON text),
and generations as the integrations Langfuse's ChatML view has adapters for store them: a whole `Response`
(OpenInference's OpenAI Agents instrumentation), Responses items without their `type`, LangChain /
LangGraph messages, GenAI `parts` (pydantic-ai, Microsoft Agent Framework) and AI SDK content parts.
Each generation's row must hold every input text and the answer (or its tool calls) the call had.

When the shared corpus is beside the checkout, its two real traces (both forms) are more cases of the same
checks, against Langfuse's own ChatML rendering of each generation as the oracle of what it held.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tlmscore
from tests.support.paths import CORPUS, FIXTURES
from tlmscore.stores import find_reader

FOLDER = FIXTURES / "traces" / "langfuse"
SHARED = CORPUS / "langfuse"


def _rows(path: Path, tmp_path: Path) -> pd.DataFrame:
    return tlmscore.prepare(str(path), tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache"))


def _arguments(arguments: Any) -> list[str]:
    """The values of a tool call's arguments, as a rendered call shows them."""
    parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    return [json.dumps(v, ensure_ascii=False) for v in parsed.values()] if isinstance(parsed, dict) else []


# What each made-up generation held: every input text, the answer's text and its tool calls (name, argument values).
EXPECTED: dict[str, tuple[list[str], list[str]]] = {
    "a1b2c3d4e5f60003": (["You are a travel assistant.", "Will it rain in Lisbon on Saturday?", "get_forecast"],
                         ["get_forecast", '"Lisbon"', '"Saturday"']),
    "a1b2c3d4e5f60004": (["You are a travel assistant.", "Will it rain in Lisbon on Saturday?", '"Lisbon"',
                          "Lisbon, Saturday: sunny, high 24 °C, low 16 °C, rain 5 %."],
                         ["Saturday in Lisbon looks sunny with a high of 24 °C, according to the forecast tool."]),
    "b1b2c3d4e5f60002": (["You are Acme's support agent. Never promise refunds.", "Where is my order A-1042?",
                          "lookup_order"], ["lookup_order", '"A-1042"']),
    "b1b2c3d4e5f60004": (["Never promise refunds.", "Where is my order A-1042?", "lookup_order", '"A-1042"',
                          '\\"carrier\\": \\"DHL\\"'],
                         ["Order A-1042 has shipped with DHL and should arrive on 28 November."]),
    "c0c0c0c0c0c00001": (["You convert currencies with the convert_currency tool only.", "Convert 250 EUR to USD.",
                          "convert_currency", '\\"rate\\": 1.086'], ["250 EUR is 271.50 USD at a rate of 1.086."]),
    "c0c0c0c0c0c00002": (["And 90 GBP to JPY?"], ["convert_currency", '"GBP"', '"JPY"', "90"]),
    "c0c0c0c0c0c00003": (["Answer only from the product docs.", "Which of our plans includes SSO?", "search_docs",
                          '"SSO plans"', "SSO is part of the Business and Enterprise plans."],
                         ["SSO comes with the Business and Enterprise plans."]),
    "c0c0c0c0c0c00004": (["You are the warehouse assistant.", "How many SKU-88 do we have", "get_stock"],
                         ["get_stock", '"SKU-88"']),
    "c0c0c0c0c0c00005": (["You are the warehouse assistant.", "How many SKU-88 do we have", "get_stock",
                          '\\"on_hand\\": 7'], ["We have 7 of SKU-88, under 10: I will reorder.", "reorder", "20"]),
    "c0c0c0c0c0c00006": (["You book office desks.", "Book a desk in Berlin for Monday.", "book_desk",
                          "call_Lc6wY7rE8fG9hJ0kL1zX2cV3", "Desk B-14 booked in Berlin for Monday."],
                         ["Done: desk B-14 in Berlin is yours on Monday."]),
    "c0c0c0c0c0c00007": (["You schedule meetings.", "Set up a call with Dana on Friday at 3pm."],
                         ["create_event", '"Dana"', '"Friday 15:00"']),
    "c0c0c0c0c0c00008": (["Reply in French.", "Say good morning to the team."], ["Bonjour à toute l'équipe !"]),
    "c0c0c0c0c0c00009": (["You answer from the HR handbook.", "How many vacation days do new hires get?",
                          "query_handbook", "New hires get 25 vacation days a year, prorated in the first year."],
                         ["New hires get 25 vacation days a year, prorated in their first year."]),
    "c0c0c0c0c0c00010": (["What's the weather in Oslo right now?"],
                         ["Let me check the current weather.", "get_weather", '"Oslo"']),
    "c0c0c0c0c0c00011": (["Summarise in one line.", "Deploy finished in 4 minutes; 2 pods restarted; no errors."],
                         ["Deploy done in 4 min, 2 pod restarts, no errors."]),
}
FILES = {"openai-agents.ui.json": "langfuse-trace", "langgraph.trpc.json": "langfuse-trace",
         "frameworks.observations.jsonl": "langfuse"}


def test_a_trace_gives_its_generations_in_start_order_with_trace_and_observation_ids(tmp_path: Path) -> None:
    rows = _rows(FOLDER / "openai-agents.ui.json", tmp_path)
    assert list(rows["span_id"]) == ["a1b2c3d4e5f60003", "a1b2c3d4e5f60004"]  # not the file's order
    assert set(rows["trace_id"]) == {"4bf92f3577b34da6a3ce929d0e0e4736"}
    assert list(rows["id"]) == list(rows["span_id"])
    first = rows.iloc[0]
    assert first["response"].startswith("<tool_call>")  # the whole Response: its function call is the answer
    assert first["response_status"] == "completed" and not first["warnings"]  # nothing was lost
    whole = _rows(FOLDER / "frameworks.observations.jsonl", tmp_path).set_index("span_id").loc["c0c0c0c0c0c00008"]
    assert not whole["warnings"]  # a whole chat completion as the output: its id and finish reason are kept


def _unpacked(trpc: Path, tmp_path: Path) -> Path:
    """A web API trace (input, output and metadata as JSON text) as the UI downloads it (as values)."""
    given = json.loads(trpc.read_text(encoding="utf-8"))
    values = {**given, "observations": [{k: (json.loads(v) if k in ("input", "output", "metadata") and
                                             isinstance(v, str) else v) for k, v in o.items()}
                                        for o in given["observations"]]}
    values["trace"] = {k: v for k, v in given["trace"].items() if k != "observations"}
    unpacked = tmp_path / f"{trpc.stem}.ui.json"
    unpacked.write_text(json.dumps(values), encoding="utf-8")
    return unpacked


def _forms() -> list[Any]:
    """Pairs of one trace in both forms: the project's own (unpacked here) and the shared corpus's real ones."""
    shared = [(next(SHARED.glob(f"trpc/{kind}*.json")), next(SHARED.glob(f"ui/{kind}*.json")), kind == "openai-agents")
              for kind in ("openai-agents", "langgraph")] if SHARED.is_dir() else []
    return [pytest.param(FOLDER / "langgraph.trpc.json", None, False, id="langgraph"),
            *(pytest.param(*pair, id=f"shared-{pair[0].name}") for pair in shared)]


@pytest.mark.parametrize(("trpc", "ui", "instructed"), _forms())
def test_json_text_and_json_values_give_the_same_rows(trpc: Path, ui: Path | None, instructed: bool,
                                                       tmp_path: Path) -> None:
    text, parsed = _rows(trpc, tmp_path), _rows(ui or _unpacked(trpc, tmp_path), tmp_path)
    assert len(text) > 0 and text["error"].isna().all()
    for column in ("span_id", "trace_id", "prompt", "response"):
        assert list(text[column]) == list(parsed[column])
    if instructed:  # a real Agents SDK trace: the agent's instructions, kept only in the Response it logged
        assert all("You are a helpful agent." in prompt for prompt in parsed["prompt"])


def test_a_page_of_the_observations_api_is_read_as_its_generations(tmp_path: Path) -> None:
    given = json.loads((FOLDER / "openai-agents.ui.json").read_text(encoding="utf-8"))
    page = tmp_path / "observations.json"
    page.write_text(json.dumps({"data": given["observations"], "meta": {"page": 1, "limit": 50, "totalItems": 5,
                                                                        "totalPages": 1}}), encoding="utf-8")
    rows, trace = _rows(page, tmp_path), _rows(FOLDER / "openai-agents.ui.json", tmp_path)
    for column in ("span_id", "trace_id", "prompt", "response"):
        assert list(rows[column]) == list(trace[column])


def test_responses_items_without_their_type_are_read_by_their_shape() -> None:
    from tlmscore.stores.langfuse_shapes import item_type, typed_items

    assert item_type({"call_id": "c", "name": "f", "arguments": "{}"}) == "function_call"
    assert item_type({"call_id": "c", "output": "x"}) == "function_call_output"
    assert item_type({"id": "rs_1", "summary": []}) == "reasoning"
    assert item_type({"id": "msg_1", "role": "assistant", "content": []}) == "message"
    assert item_type({"type": "web_search_call", "action": {}}) == "web_search_call"
    assert item_type({"foo": 1}) is None
    typed = typed_items([{"call_id": "c", "name": "f", "arguments": {"a": 1}}])
    assert typed == [{"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a":1}'}]


def test_a_trace_with_no_generation_and_a_value_that_is_no_trace_are_one_error_row_each(tmp_path: Path) -> None:
    given = json.loads((FOLDER / "openai-agents.ui.json").read_text(encoding="utf-8"))
    spans_only = {**given, "observations": [o for o in given["observations"] if o["type"] != "GENERATION"]}
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(v) for v in (given, spans_only, given["trace"] | {"observations": 3},
                                                      given)) + "\n", encoding="utf-8")
    rows = _rows(path, tmp_path)
    errors = [e for e in rows["error"] if isinstance(e, str)]
    assert len(rows) == 2 + 1 + 1 + 2
    assert len(errors) == 2
    assert "holds no GENERATION observation" in errors[0]
    assert "not a Langfuse trace" in errors[1]


# Each generation's row holds every input text and the answer (or its tool calls) the call held: for the
# project's own traces, as EXPECTED lists them; for the shared corpus's real traces, as Langfuse's ChatML view
# of each generation shows them.

def _shown(text: str, rendered: str) -> bool:
    """Whether a text is in a rendering: as it is, or escaped inside a JSON block (a tool's output)."""
    return text in rendered or json.dumps(text, ensure_ascii=False)[1:-1] in rendered


def _chatml_texts(messages: list[dict[str, Any]]) -> list[str]:
    """Every text a ChatML view shows: contents, tool call names and argument values."""
    texts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and content.strip():
            texts.append(content)
        for call in message.get("tool_calls") or []:
            texts += [call["name"], *_arguments(call.get("arguments"))]
    return texts


def _held() -> dict[str, tuple[list[str], list[str]]]:
    """What each generation held, by observation id: the project's own, and the shared corpus's when present."""
    held = dict(EXPECTED)
    for path in sorted(SHARED.glob("chatml/*.json")) if SHARED.is_dir() else []:
        for span_id, shown in json.loads(path.read_text(encoding="utf-8")).items():
            # A side the ChatML view could not render holds an error instead of messages (not a generation's).
            held[span_id] = (_chatml_texts(shown["input"].get("data") or []),
                             _chatml_texts(shown["output"].get("data") or []))
    return held


HELD = _held()
# The shared corpus's real traces (as the UI downloads them, and as the web API returns them); none when absent.
SHARED_TRACES = sorted([*SHARED.glob("ui/*.json"), *SHARED.glob("trpc/*.json")]) if SHARED.is_dir() else []
CASES = [pytest.param(FOLDER / name, FILES[name], id=name) for name in FILES] + [
    pytest.param(path, "langfuse-trace", id=f"shared-{path.parent.name}-{path.name}") for path in SHARED_TRACES]


@pytest.mark.parametrize(("path", "reader"), CASES)
def test_every_generation_is_a_row_holding_what_the_call_held(path: Path, reader: str, tmp_path: Path) -> None:
    found = find_reader(str(path))
    assert found is not None and found.name == reader
    rows = _rows(path, tmp_path)
    assert len(rows) > 0 and rows["error"].isna().all(), list(rows["error"])
    assert set(rows["origin"]) == {"langfuse"}
    for _, row in rows.iterrows():
        inputs, answer = HELD[row["span_id"]]
        missing = [text for text in inputs if not _shown(text, row["prompt"])]
        assert not missing, (path.name, row["span_id"], missing, row["prompt"])
        missing = [text for text in answer if not _shown(text, row["response"])]
        assert not missing, (path.name, row["span_id"], missing, row["response"])
