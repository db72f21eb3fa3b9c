"""The validity bench reads RAGTruth, LLM-AggreFact and HaluEval in their published formats (small samples)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"
SOURCE = ("The council approved the new harbour budget of 12 million euros on Monday. "
          "Work on the northern pier starts in March and ends in 2027.")


def public_sets() -> ModuleType:
    spec = importlib.util.spec_from_file_location("public_sets", BENCHMARKS / "_public_sets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_lines(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return path


def ragtruth(folder: Path) -> Path:
    folder.mkdir()
    write_lines(folder / "source_info.jsonl", [
        {"source_id": "11", "task_type": "Summary", "source": "CNN/DM", "source_info": SOURCE, "prompt": "Summarize"},
        {"source_id": "12", "task_type": "QA", "source": "MARCO", "prompt": "Briefly answer",
         "source_info": {"question": "when does pier work end", "passages": f"passage 1:{SOURCE}\n\n"}}])
    span = {"start": 40, "end": 52, "text": "15 million", "meta": "", "label_type": "Evident Conflict"}
    write_lines(folder / "response.jsonl", [
        {"id": "1", "source_id": "11", "model": "gpt-4-0613", "temperature": 0.7, "labels": [], "split": "test",
         "quality": "good", "response": "The council approved a harbour budget of 12 million euros on Monday."},
        {"id": "2", "source_id": "11", "model": "llama-2-7b-chat", "temperature": 0.7, "labels": [span],
         "split": "test", "quality": "good",
         "response": "The council approved a harbour budget of 15 million euros on Friday."},
        {"id": "3", "source_id": "12", "model": "gpt-4-0613", "temperature": 0.7, "labels": [], "split": "test",
         "quality": "good", "response": "Work on the northern pier ends in 2027."},
        {"id": "4", "source_id": "12", "model": "mistral-7B-instruct", "temperature": 0.7, "labels": [],
         "split": "train", "quality": "good", "response": "Not read: the train split."}])
    return folder


def test_the_readers_label_and_shape_records(tmp_path: Path) -> None:
    sets = public_sets()
    found = sets.ragtruth(ragtruth(tmp_path / "rt"))
    assert [r["id"] for r in found] == ["ragtruth-1", "ragtruth-2", "ragtruth-3"]
    assert [r["metadata"]["label"] for r in found] == [1, 0, 1]
    assert found[2]["request"]["input"][0]["content"] == "when does pier work end"
    assert found[2]["request"]["input"][2]["output"].startswith("passage 1:")
    assert len(sets.ragtruth(tmp_path / "rt", split=None)) == 4
    halu = write_lines(tmp_path / "qa_data.json", [{"knowledge": SOURCE, "question": "How big is the budget?",
                                                    "right_answer": "12 million euros",
                                                    "hallucinated_answer": "20 million euros"}])
    assert [r["metadata"]["label"] for r in sets.halueval(halu)] == [1, 0]


@pytest.mark.parametrize(("name", "text", "error"), [
    ("agg.jsonl", '{"dataset": "x", "doc": "d", "claim": "c", "label": 1}\n{"dataset": "x", "doc": "d", "label": 0}\n',
     "agg.jsonl:2: missing field 'claim'"),
    ("agg.jsonl", '{"dataset": "x", "doc": "d", "claim": "c", "label": "yes"}\n', "agg.jsonl:1: label must be"),
    ("agg.csv", "dataset,doc,claim,label\nx,d,c,1\nx,d,c\n", "agg.csv:3: missing field 'label'"),
    ("halu.json", '{"knowledge": "k"}\n', "halu.json:1: not a HaluEval"),
    ("halu.json", '{"knowledge": "k", "right_answer": "a"\n', "halu.json:1: not JSON"),
])
def test_a_malformed_line_is_named_by_file_and_line(tmp_path: Path, name: str, text: str, error: str) -> None:
    sets = public_sets()
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    reader = sets.aggrefact if name.startswith("agg") else sets.halueval
    with pytest.raises(sets.FormatError, match=error.replace("(", r"\(")):
        reader(path)


def test_the_bench_prints_figures_and_published_references(tmp_path: Path) -> None:
    folder = ragtruth(tmp_path / "rt")
    agg = write_lines(tmp_path / "aggrefact.jsonl", [
        {"dataset": "AggreFact-CNN", "doc": SOURCE, "claim": "The budget is 12 million euros.", "label": 1},
        {"dataset": "AggreFact-CNN", "doc": SOURCE, "claim": "The budget is 30 million euros.", "label": 0},
        {"dataset": "ExpertQA", "doc": SOURCE, "claim": "Pier work starts in March.", "label": 1},
        {"dataset": "ExpertQA", "doc": SOURCE, "claim": "Pier work starts in June.", "label": 0}])
    halu = write_lines(tmp_path / "summarization_data.json", [
        {"document": SOURCE, "right_summary": "The council approved a 12 million euro harbour budget.",
         "hallucinated_summary": "The council rejected a 40 million euro harbour budget."}])
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent)}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "validity_bench.py"), "--sets", "--ragtruth", str(folder),
                           "--aggrefact", str(agg), "--halueval", str(halu)],
                          capture_output=True, text=True, env=env, check=False, timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "| RAGTruth test | grounding | 3 | 2 |" in out
    assert "| LLM-AggreFact AggreFact-CNN | grounding | 2 | 1 |" in out and "LLM-AggreFact mean of datasets" in out
    assert "| HaluEval summarization_data | grounding | 2 | 1 |" in out
    assert "published: GPT-4 prompt 63.4, LettuceDetect-large 79.2, fine-tuned Llama-2-13B 78.7" in out
    assert "published: MiniCheck-7B 77.1, GPT-4o 75.9, AlignScore 70.5, SummaC-ZS 67.7" in out
    assert "RAGTruth test, grounding: response-level F1 100.0" in out


def test_the_bench_refuses_a_malformed_file_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "halu.json"
    bad.write_text('{"knowledge": "k"}\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent)}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "validity_bench.py"), "--sets", "--halueval", str(bad)],
                          capture_output=True, text=True, env=env, check=False, timeout=600)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"validity_bench: {bad}:1: not a HaluEval QA, summarization or "
                                                f"dialogue line (no right_answer, right_summary or right_response)"]
