"""The scorer table of docs/scorers.md: written by the validity bench from the rows' scores, and what it states.

The end-to-end test scores small WiCE and SummEdits files of its own (the development sets are not
needed) with grounding and with the judge in claims mode against a fake model server on 127.0.0.1.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.servers.judge_server import ChatReply, ChatServer, completion
from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"
SOURCE = ("The council approved the new harbour budget of 12 million euros on Monday. "
          "Work on the northern pier starts in March and ends in 2027.")
GOOD = ("The council approved a harbour budget of 12 million euros.", "Work on the northern pier ends in 2027.")
BAD = ("The council approved a harbour budget of 40 million euros.", "Work on the northern pier ends in 2031.")


def bench_module(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # a dataclass's module is looked up while it is made
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


def row(grounding: float, judge: float, label: int, flags: tuple[str, ...] = (),
        wice: str | None = None) -> dict[str, Any]:
    return {"id": "x", "label": label, "wice_label": wice, "grounding": grounding, "judge": judge, "flags": list(flags)}


def test_the_cascade_keeps_grounding_where_it_is_sure_and_blends_elsewhere() -> None:
    table = bench_module("_scorer_table")
    rows = [row(0.95, 0.1, 1), row(0.95, 0.1, 1, ("number_missing",)), row(0.05, 0.9, 0), row(0.5, 0.7, 1),
            row(math.nan, 0.4, 0)]
    assert table.combined(rows, "cascade", 0.1, 0.9)[:4] == [0.95, (0.95 + 0.1) / 2, 0.05, (0.5 + 0.7) / 2]
    assert table.combined(rows, "cascade", 0.1, 0.9)[4] == 0.4  # no grounding score: the judge's
    assert table.combined(rows, "blend") == [(0.95 + 0.1) / 2, (0.95 + 0.1) / 2, (0.05 + 0.9) / 2, 0.6, 0.4]
    assert [table.sure(r, 0.1, 0.9) for r in rows] == [True, False, True, False, False]


def test_thresholds_are_chosen_on_one_set_and_wice_leaves_partial_rows_out_of_supported_vs_not() -> None:
    table = bench_module("_scorer_table")
    auroc = bench_module("_validity").auroc
    # grounding is right when sure (0.95 / 0.05) and wrong in the middle, where the judge is right
    rows = [row(0.95, 0.5, 1), row(0.05, 0.5, 0), row(0.55, 0.9, 1), row(0.6, 0.1, 0), row(0.58, 0.2, 0)]
    assert table.figures("summedits", rows, [r["grounding"] for r in rows], auroc)["SummEdits"] < 1.0
    low, high = table.choose("summedits", rows, auroc)
    assert table.figures("summedits", rows, table.combined(rows, "cascade", low, high), auroc) == {"SummEdits": 1.0}
    assert low < 0.55 and 0.58 < high <= 0.95  # the unsure middle goes to the model, the sure rows do not
    wice = [row(0.9, 0.9, 1, wice="supported"), row(0.95, 0.2, 0, wice="partially_supported"),
            row(0.1, 0.1, 0, wice="not_supported")]
    found = table.figures("wice", wice, [r["grounding"] for r in wice], auroc)
    assert found == {"WiCE s vs not": 1.0, "WiCE s vs rest": 0.5}


def fact_checker(body: dict[str, Any], n: int) -> ChatReply:
    """Says yes to a claim whose numbers are in its passage, with log-probabilities."""
    claim = body["messages"][1]["content"].split("CLAIM: ")[1]
    supported = "40 million" not in claim and "2031" not in claim
    top = [("Yes", math.log(0.8)), ("No", math.log(0.2))] if supported else [("No", math.log(0.7)),
                                                                             ("Yes", math.log(0.3))]
    return ChatReply(body=completion(top[0][0], top))


def write_sets(folder: Path) -> tuple[Path, Path]:
    wice = folder / "wice.jsonl.gz"
    lines = [{"label": label, "claim": claim, "evidence": SOURCE.split(". "), "meta": {"id": f"c{n}"}}
             for n, (label, claim) in enumerate([("supported", GOOD[0]), ("not_supported", BAD[0]),
                                                 ("supported", GOOD[1]), ("partially_supported", BAD[1])])]
    with gzip.open(wice, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)
    summedits = folder / "summedits"
    summedits.mkdir()
    items = [{"doc": SOURCE, "summary": " ".join(GOOD), "label": 1},
             {"doc": SOURCE, "summary": " ".join(BAD), "label": 0}]
    with gzip.open(summedits / "summedits_news.json.gz", "wt", encoding="utf-8") as handle:
        json.dump(items * 8, handle)
    return wice, summedits


def test_the_bench_scores_both_sets_and_writes_the_table_into_the_page(tmp_path: Path) -> None:
    wice, summedits = write_sets(tmp_path)
    page = tmp_path / "page.md"
    page.write_text("# Scorers\n\nBefore.\n", encoding="utf-8")
    scores = tmp_path / "scores.json"
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent)}
    with ChatServer(fact_checker) as server:
        options = json.dumps({"base_url": server.url, "model": "qwen2.5-coder-1.5b", "mode": "claims"})
        done = subprocess.run([sys.executable, str(BENCHMARKS / "validity_bench.py"), "--scorer-table", str(page),
                               "--wice", str(wice), "--summedits", str(summedits), "--sample", "64", "--scores",
                               str(scores), "--judge-options", options],
                              capture_output=True, text=True, env=env, check=False, timeout=600)
    assert done.returncode == 0, done.stderr
    # one request per claim: 4 WiCE rows of one claim; 8 SummEdits rows (the sample: 64 / 8 domains) of two
    assert server.calls == 4 + 8 * 2
    kept = json.loads(scores.read_text(encoding="utf-8"))
    assert [len(kept["sets"][s]["rows"]) for s in ("wice", "summedits")] == [4, 8]
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Scorers\n\nBefore.\n\n<!-- scorer table: begin")
    judge = next(line for line in text.splitlines() if line.startswith("| `judge`, `mode=claims`"))
    assert "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (local)" in judge and "| 1.000 | 1.000 | 1.000 |" in judge
    # rewritten from the kept scores, the page holds one table, the same
    again = subprocess.run([sys.executable, str(BENCHMARKS / "validity_bench.py"), "--scorer-table", str(page),
                            "--from-scores", str(scores)], capture_output=True, text=True, env=env, check=False,
                           timeout=600)
    assert again.returncode == 0, again.stderr
    assert page.read_text(encoding="utf-8") == text and text.count("scorer table: begin") == 1



def test_the_scorers_page_shows_the_table_its_kept_scores_give() -> None:
    table = bench_module("_scorer_table")
    auroc = bench_module("_validity").auroc
    kept = json.loads((BENCHMARKS / "scorer_table.json").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "scorers.md").read_text(encoding="utf-8")
    shown = page.split(table.BEGIN, 1)[1].split(table.END, 1)[0].strip()
    assert shown == table.table(kept, auroc)
