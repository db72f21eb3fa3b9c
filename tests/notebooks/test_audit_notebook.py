"""The audit notebook: committed with its outputs, public API only, runs offline, plots titled, a sensible list."""

from __future__ import annotations

import ast
import json
import tempfile
from typing import Any

import nbclient
import nbformat
import pandas as pd
import pytest

from tests.support.paths import ROOT
from tlmscore.audit import least_supported, not_scored

NOTEBOOK = ROOT / "notebooks" / "audit.ipynb"
LABELLED = ROOT / "fixtures" / "labelled" / "labelled.jsonl"
# item fixtures whose tool output says what the answer says: a word-by-word check scores them low
FAITHFUL_TOOL_ANSWERS = {"shell-hosted", "code-interpreter-logs-image", "mcp-approval-denied"}
# run after the notebook's own cells (in the test's copy only): figures stay open, then what was shown
KEEP_FIGURES = "%config InlineBackend.close_figures = False"
REPORT = """import json as _json
import matplotlib.pyplot as _plt
print("REPORT " + _json.dumps({
    "titles": [[ax.get_title() for ax in _plt.figure(n).axes] for n in _plt.get_fignums()],
    "top": list(least.id[:10]),
    "evidence": list(least.evidence[:10]),
}))"""


def code_cells() -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return [c for c in cells if c["cell_type"] == "code"]


def labels() -> dict[str, str]:
    records = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines()]
    return {r["id"]: r["metadata"]["label"] for r in records}


def test_the_notebook_is_committed_with_its_outputs() -> None:
    cells = code_cells()
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1))
    assert all(o.get("output_type") != "error" for c in cells for o in c["outputs"])
    kinds = {kind for c in cells for o in c["outputs"] for kind in o.get("data", {})}
    assert {"image/png", "text/html"} <= kinds
    committed = NOTEBOOK.read_text(encoding="utf-8")
    assert str(ROOT) not in committed and tempfile.gettempdir() not in committed  # no machine's paths


def private_names(source: str) -> list[str]:
    """Imports of `_private` modules or names, and `obj._private` attributes, in one cell's code."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    found = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.ImportFrom):
            found += [node.module or ""] if any(p.startswith("_") for p in (node.module or "").split(".")) else []
            found += [a.name for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if any(p.startswith("_") for p in a.name.split("."))]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            found.append(node.attr)
    return found


def test_the_notebook_uses_the_public_api_only() -> None:
    assert [name for c in code_cells() for name in private_names("".join(c["source"]))] == []
    assert private_names("from tlmscore.pipeline._run import frame\nview._page('u')") == ["tlmscore.pipeline._run",
                                                                                          "_page"]


@pytest.fixture(scope="module")
def executed() -> dict[str, Any]:
    """The notebook run from a clean kernel, offline, and what it showed."""
    nb = nbformat.read(NOTEBOOK, as_version=4)  # type: ignore[no-untyped-call]
    nb.cells.insert(0, nbformat.v4.new_code_cell(KEEP_FIGURES))  # type: ignore[no-untyped-call]
    nb.cells.append(nbformat.v4.new_code_cell(REPORT))  # type: ignore[no-untyped-call]
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(str(o.get("text", "")) for o in outputs)
    report = json.loads(text.split("REPORT ", 1)[1].splitlines()[0])
    html = "".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
    return {"report": report, "text": text, "html": html, "outputs": outputs, "cells": nb.cells[1:-1]}


def _shown(cell: dict[str, Any]) -> list[str]:
    """What a code cell showed as text (printed, and the plain form of its values)."""
    return ["".join(o.get("text", "")) or "".join(o.get("data", {}).get("text/plain", ""))
            for o in cell.get("outputs", [])]


def test_a_run_shows_what_the_committed_outputs_show(executed: dict[str, Any]) -> None:
    """A reader who runs the notebook sees the committed text (no None turned NaN, no other count)."""
    ran = [c for c in executed["cells"] if c["cell_type"] == "code"]
    assert [_shown(c) for c in ran] == [_shown(c) for c in code_cells()]


def test_the_notebook_runs_offline_and_shows_the_drill_down(executed: dict[str, Any]) -> None:
    html = executed["html"]
    assert '<div class="tlm">' in html and "<mark class=" in html and "<details" in html
    assert any("image/png" in o.get("data", {}) for o in executed["outputs"])
    assert "flagged rows written to flagged.csv" in executed["text"]


def test_every_plot_is_titled(executed: dict[str, Any]) -> None:
    titles = executed["report"]["titles"]
    assert titles and all(title.strip() for figure in titles for title in figure)


def test_the_least_supported_list_is_topped_by_answers_their_evidence_contradicts(executed: dict[str, Any]) -> None:
    top = executed["report"]["top"]
    known = labels()
    assert all(known.get(row) == "contradicted" for row in top[:3])
    assert not [row for row in top[:10] if known.get(row) == "faithful" or row in FAITHFUL_TOOL_ANSWERS]
    evidence = executed["report"]["evidence"]
    assert evidence == sorted(evidence, key=["documents", "tool outputs", "other"].index)


def test_least_supported_orders_documents_first_and_leaves_out_unscored_rows() -> None:
    nan = float("nan")
    df = pd.DataFrame([
        {"id": "tool", "score": 0.05, "error": None, "explanation": "", "details": {"evidence": {"tool_outputs": 1}}},
        {"id": "page-high", "score": 0.9, "error": None, "explanation": "", "details": {"evidence": {"pages": 2}}},
        {"id": "page-low", "score": 0.3, "error": None, "explanation": "", "details": {"evidence": {"files": 1}}},
        {"id": "none", "score": nan, "error": None, "explanation": "no evidence to check the answer against: x",
         "details": {}},
        {"id": "bad", "score": nan, "error": "f:1: invalid JSON", "explanation": "", "details": {}},
    ])
    ranked = least_supported(df)
    assert list(ranked.id) == ["page-low", "page-high", "tool"]
    assert list(ranked.evidence) == ["documents", "documents", "tool outputs"]
    assert list(least_supported(df, limit=1).id) == ["page-low"]
    reasons = not_scored(df).set_index("reason")
    assert reasons.loc["no evidence to check the answer against", "rows"] == 1
    assert reasons.filter(like="error", axis=0)["examples"].tolist() == ["bad"]
