"""The audit notebook runs from a clean kernel, offline, and shows the drill-down view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "audit.ipynb"


def test_notebook_is_committed_without_outputs() -> None:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)


def test_audit_notebook_executes_offline(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    html = "".join(str(o.get("data", {}).get("text/html", "")) for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    assert '<div class="tlm">' in html and "<mark class=" in html and "<details" in html
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert images
    text = "".join(str(o.get("text", "")) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "flagged rows written to" in text
    (tmp_path / "executed.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
