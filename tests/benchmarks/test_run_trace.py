"""`benchmarks/_run_trace.py`: a cold run traced as `fetch_bench.py` traces it still extracts its pages, and the
extraction processes' trace names each one (a hook that no longer fits the code it wraps fails every page)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"
PARAGRAPHS = ("The council approved the new harbour budget of 12 million euros on Monday, after a debate that "
              "ran late into the evening and drew a full public gallery.",
              "Work on the northern pier starts in March and is planned to end in 2027; the old ferry ramp "
              "stays open while the new one is built beside it.",
              "Local fishermen welcomed the plan, though several asked for a second landing stage near the "
              "market hall, which the council promised to study next year.")


@pytest.fixture
def helpers(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the helpers import each other, as when a benchmark runs
    return importlib.import_module("_run_trace"), importlib.import_module("_cpu_account")


def web_search_record(url: str) -> dict[str, object]:
    text = "The harbour budget is 12 million euros."
    return {"id": "r1", "request": {"model": "gpt-4.1", "input": "Harbour budget?", "tools": [{"type": "web_search"}]},
            "response": {"id": "resp_1", "object": "response", "model": "gpt-4.1", "status": "completed", "output": [
                {"type": "web_search_call", "id": "ws_1", "status": "completed",
                 "action": {"type": "search", "query": "harbour budget", "sources": [{"type": "url", "url": url}]}},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [
                    {"type": "output_text", "text": text, "annotations": [
                        {"type": "url_citation", "url": url, "title": "Harbour", "start_index": 0,
                         "end_index": len(text)}]}]}]}}


def test_a_traced_cold_run_extracts_its_page_and_the_trace_names_it(
        tmp_path: Path, helpers: tuple[ModuleType, ModuleType]) -> None:
    run_trace, cpu_account = helpers
    work = tmp_path / "work"
    work.mkdir()
    marks, trace, workers, out = work / "marks.json", work / "trace.json", work / "workers.tsv", work / "out.jsonl"
    with EvidenceServer() as server:
        url = server.route("/harbour.html", Reply(body=html_page("Harbour budget", *PARAGRAPHS)))
        batch = tmp_path / "batch.jsonl"
        batch.write_text(json.dumps(web_search_record(url)) + "\n", encoding="utf-8")
        argv = ["prepare", str(batch), "-o", str(out), "--cache-dir", str(tmp_path / "cache"),
                "--allow-host", "127.0.0.1", "--quiet"]
        env = {**os.environ, "PYTHONPATH": f"{run_trace.site_folder(work)}{os.pathsep}{ROOT}",
               "TLMSCORE_TRACE_WORKERS": str(workers)}
        done = subprocess.run(run_trace.command(sys.executable, marks, trace, argv), env=env, cwd=work,
                              capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    row = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert (row["n_urls_ok"], row["n_urls_failed"]) == (1, 0), row["prompt"]
    kinds = [line.split("\t")[2] for line in workers.read_text(encoding="utf-8").splitlines() if url in line]
    assert kinds == ["extract", "extracted"]
    events = run_trace.read(trace)
    assert events is not None and run_trace.summary(events)["milestones"]["last extracted"] > 0
    assert cpu_account.read(marks)["parent"] > 0
