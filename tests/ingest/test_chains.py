"""Chains: previous_response_id, conversations and item references resolved across files, streamed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT
from tlmscore import MemoryPages, Settings, prepare, read_transcripts
from tlmscore.ingest import ChainIndex, History, with_history

FIXTURES = ROOT / "fixtures"
CHAIN_A, CHAIN_B = FIXTURES / "chain_a.jsonl", FIXTURES / "chain_b.jsonl"


def run(sources: Any, tmp_path: Path) -> Any:
    return prepare(sources, Settings(offline=True, cache_dir=tmp_path / "cache"), pages=MemoryPages()).set_index("id")


def response(rid: str, text: str, prev: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": rid, "object": "response", "created_at": 1, "model": "gpt-4.1", "previous_response_id": prev,
            "output": [{"type": "message", "id": f"msg_{rid}", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}], **extra}


@pytest.mark.parametrize("order", [(CHAIN_A, CHAIN_B), (CHAIN_B, CHAIN_A)])
def test_third_call_of_a_chain_split_across_files_sees_the_first_two(tmp_path: Path, order: tuple[Path, ...]) -> None:
    df = run(list(order), tmp_path)
    prompt = df.loc["chain-3-packing", "prompt"]
    expected = ["User: I'm in Lisbon this weekend. What's the weather like?", '"name": "get_weather"',
                '"output": "{\\"city\\": \\"Lisbon\\", \\"forecast\\": \\"sunny\\"',
                "Assistant: Lisbon will be sunny this weekend", "User: So what should I pack?"]
    positions = [prompt.index(e) for e in expected]
    assert positions == sorted(positions)
    assert prompt.startswith("System: Tripmate (v2)") and "Tripmate (v1)" not in prompt
    assert df.loc["chain-3-packing", "history_complete"] and df.loc["chain-3-packing", "warnings"] == []
    assert df.loc["chain-2-weather-answer", "prompt"].count("Lisbon this weekend") == 1
    assert df.loc["chain-1-ask-weather", "history_complete"]


def test_a_missing_link_is_a_warning_and_an_incomplete_history(tmp_path: Path) -> None:
    df = run(CHAIN_B, tmp_path)
    row = df.loc["chain-3-packing"]
    assert row.error is None and not row.history_complete
    assert row.warnings[0].startswith("previous response 'resp_2a1b3c4d5e6f7a8b") and "is not in the set" in \
        row.warnings[0]
    assert row.prompt.startswith("System: Tripmate (v2)") and "Lisbon" not in row.prompt


def test_the_index_keeps_only_referenced_records_and_loads_them_by_offset(tmp_path: Path) -> None:
    log = tmp_path / "big.jsonl"
    lines = [json.dumps({"request": {"input": f"q{i}"}, "response": response(f"resp_{i}", f"a{i}")})
             for i in range(200)]
    lines[150] = json.dumps({"id": "follow", "request": {"input": "and then?", "previous_response_id": "resp_7"},
                             "response": response("resp_150", "then this", prev="resp_7")})
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = ChainIndex.build(log, cache_size=1)
    assert len(index) == 1
    (follow,) = [t for t in read_transcripts(log) if t.id == "follow"]
    history = index.history(follow)
    assert history.complete
    assert [i.get("content") for i in history.items if i.get("role") == "user"] == ["q7"]
    assert index.history(follow) == history


def test_chains_in_gzipped_logs_and_in_memory_records(tmp_path: Path) -> None:
    gz = tmp_path / "b.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as handle:
        shutil.copyfileobj(CHAIN_B.open(encoding="utf-8"), handle)
    assert "Lisbon will be sunny" in run([CHAIN_A, gz], tmp_path).loc["chain-3-packing", "prompt"]
    records = [{"id": "two", "request": {"input": "second", "previous_response_id": "resp_one"},
                "response": response("resp_two", "answer two", prev="resp_one")},
               {"id": "one", "request": {"input": "first"}, "response": response("resp_one", "answer one")}]
    assert run(records, tmp_path).loc["two", "prompt"] == ("User: first\n\nAssistant: answer one\n\n"
                                                           "User: second\n\nAssistant:")


def test_conversation_items_in_the_set_are_history(tmp_path: Path) -> None:
    records = [{"id": f"c{n}", "request": {"input": f"question {n}", "conversation": "conv_42"},
                "response": response(f"resp_c{n}", f"answer {n}", conversation={"id": "conv_42"}, created_at=n)}
               for n in (3, 1, 2)]
    df = run(records, tmp_path)
    assert df.loc["c3", "prompt"] == ("User: question 1\n\nAssistant: answer 1\n\nUser: question 2\n\n"
                                      "Assistant: answer 2\n\nUser: question 3\n\nAssistant:")
    assert df.loc["c1", "prompt"] == "question 1"


def test_loops_and_item_references_are_reported_not_fatal(tmp_path: Path) -> None:
    records = [{"id": "x", "request": {"input": "x", "previous_response_id": "resp_y"},
                "response": response("resp_x", "x", prev="resp_y")},
               {"id": "y", "request": {"input": "y", "previous_response_id": "resp_x"},
                "response": response("resp_y", "y", prev="resp_x")},
               {"id": "r", "request": {"input": [{"type": "item_reference", "id": "msg_gone"},
                                                 {"role": "user", "content": "go on"}]},
                "response": response("resp_r", "ok")}]
    df = run(records, tmp_path)
    assert any("loops" in w for w in df.loc["x", "warnings"]) and not df.loc["x", "history_complete"]
    assert "item_reference 'msg_gone' is not in the set: that item is missing" in df.loc["r", "warnings"]
    assert not df.loc["r", "history_complete"]


def test_with_history_is_pure() -> None:
    (t,) = read_transcripts({"request": {"input": "now"}, "response": response("resp_n", "n")})
    history = History(items=({"role": "user", "content": "before"},))
    joined = with_history(t, history)
    assert t.request == {"input": "now"}
    assert joined.request["input"] == [{"role": "user", "content": "before"}, {"role": "user", "content": "now"}]
    assert with_history(t, History()) is t


def test_generators_are_read_once_without_chains(tmp_path: Path) -> None:
    records = ({"request": {"input": f"q{i}"}, "response": response(f"resp_{i}", "a")} for i in range(3))
    df = prepare(records, Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    assert len(df) == 3 and df.history_complete.all()


def test_a_bare_id_is_an_item_reference(tmp_path: Path) -> None:
    records = [{"id": "first", "request": {"input": "hi"}, "response": response("resp_a", "hello there")},
               {"id": "second", "request": {"input": [{"role": "user", "content": "hi"}, {"id": "msg_resp_a"},
                                                      {"role": "user", "content": "and?"}]},
                "response": response("resp_b", "that is all")}]
    row = run(records, tmp_path).loc["second"]
    assert row.prompt == "User: hi\n\nAssistant: hello there\n\nUser: and?\n\nAssistant:"
    assert row.warnings == [] and row.history_complete
