"""A real MLflow tracking server (`mlflow server`, SQLite) as a source and as a write-back target.

The calls are the project's own fixtures (every labelled Responses call and the Chat Completions
calls of the fixtures), answered by a fake OpenAI server to the official `openai` client under the
real `mlflow.openai.autolog()`, which sends its traces to the real server. An experiment read live
(`mlflow://HOST:PORT/EXPERIMENT`) must give the rows of the same calls logged as raw records; the
rows scored are written back as feedback assessments, read back through the REST API, through a
server killed in the middle of the write and started again: exactly one per span.

The server is started once for the module (and once more after it is killed).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

import tlmscore
from tests.servers.mlflow_server import (
    MlflowProcess,
    mlflow_process,  # noqa: F401  (the fixture `server`: a server of this module's)
)
from tests.servers.openai_server import OpenAIServer
from tests.servers.store_proxy import StoreProxy
from tests.support.paths import ROOT
from tlmscore import read_transcripts
from tlmscore.cli import main

pytest.importorskip("mlflow.server", reason="the MLflow server is not installed: pip install -e '.[dev]'")
pytest.importorskip("flask", reason="the MLflow server is not installed: pip install -e '.[dev]'")
# The openai SDK warns while serialising provider responses it parsed into the nearest types.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FIXTURES = ROOT / "fixtures"
LABELLED = FIXTURES / "labelled"
EXPERIMENT = "tlmscore-fixtures"
TOKEN = "mlflow-token-5c21e9"  # noqa: S105  (a made-up key the wrong servers are searched for)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("{")]


def _calls() -> dict[str, dict[str, Any]]:
    """A raw record per call, by a name that is also the model the fake answers for."""
    calls = {r["id"]: {"request": {**r["request"], "model": r["id"]}, "response": r["response"]}
             for r in _records(LABELLED / "labelled.jsonl")}
    for path in ("citations.jsonl", "fidelity.jsonl", "items.jsonl"):
        for record in _records(FIXTURES / path):
            if (record.get("response") or {}).get("object") == "chat.completion":
                calls[record["id"]] = {"request": {**record["request"], "model": record["id"]},
                                       "response": record["response"]}
    return calls


@dataclass(frozen=True)
class Recorded:
    """The calls made under autolog (`raw`: as records; `returned`: with what the `openai` client returned)."""

    raw: dict[str, dict[str, Any]]
    returned: dict[str, dict[str, Any]]
    process: MlflowProcess

    @property
    def address(self) -> str:
        return f"{self.process.address}/{EXPERIMENT}"


@pytest.fixture(scope="module")
def recorded(server: MlflowProcess, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    import openai

    calls = _calls()
    answers = tmp_path_factory.mktemp("answers")
    for name, call in calls.items():
        (answers / f"{name}.json").write_text(json.dumps(call["response"]), encoding="utf-8")
    server.feed(EXPERIMENT, answers, [call["request"] for call in calls.values()], ROOT)
    with OpenAIServer(answers) as fake:  # what the client returned (autolog records the same object)
        client = openai.OpenAI(base_url=fake.url, api_key="sk-fake", max_retries=0)
        returned = {name: {"request": call["request"], "response": (client.chat.completions.create if "messages" in
                    call["request"] else client.responses.create)(**call["request"])} for name, call in calls.items()}
    return Recorded(calls, returned, server)


def _settings(tmp_path: Path) -> tlmscore.Settings:
    return tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache")


def _same_as_raw(source: str, recorded: Recorded, tmp_path: Path) -> pd.DataFrame:
    """The rows of `source` beside the rows of the same calls logged raw: prompts and responses equal."""
    models = [t.request.get("model") for t in read_transcripts(source)]
    assert models == list(recorded.raw), "one record per LLM span, in the order the calls were made"
    rows = tlmscore.prepare(source, _settings(tmp_path))
    raw = tlmscore.prepare([recorded.raw[str(m)] for m in models], _settings(tmp_path))
    returned = tlmscore.prepare([recorded.returned[str(m)] for m in models], _settings(tmp_path))
    assert rows["error"].isna().all()
    assert list(rows["prompt"]) == list(raw["prompt"])
    assert list(rows["response"]) == list(returned["response"])
    assert list(rows["model"]) == list(raw["model"])
    assert list(rows["response_status"]) == list(raw["response_status"])
    return rows


def test_an_experiment_read_live_reads_as_the_raw_records_do(recorded: Recorded, tmp_path: Path) -> None:
    rows = _same_as_raw(recorded.address, recorded, tmp_path)
    assert set(rows["origin"]) == {"mlflow"}
    assert rows["trace_id"].str.fullmatch(r"tr-[0-9a-f]{32}").all()
    assert rows["span_id"].str.fullmatch(r"[0-9a-f]{16}").all()
    assert rows["trace_id"].is_unique


def test_an_experiment_is_read_a_page_at_a_time_each_trace_once(recorded: Recorded, tmp_path: Path) -> None:
    whole = tlmscore.prepare(recorded.address, _settings(tmp_path))
    with StoreProxy(recorded.process.url) as proxy:
        address = f"mlflow://{proxy.url.removeprefix('http://')}/{EXPERIMENT}?page=5"
        rows = tlmscore.prepare(address, _settings(tmp_path))
        searches = [path for method, path in proxy.seen if path == "/api/3.0/mlflow/traces/search"]
        batches = [path for method, path in proxy.seen if path.startswith("/api/3.0/mlflow/traces/batchGet")]
        fetched = [part for path in batches for part in path.split("&") if "trace_ids=" in part]
        limited = tlmscore.prepare(f"{address}&limit=7", _settings(tmp_path))
    pages = math.ceil(len(recorded.raw) / 5)
    assert (len(searches), len(batches)) == (pages, pages)
    assert len(fetched) == len(recorded.raw)  # every trace downloaded once
    assert list(rows["span_id"]) == list(whole["span_id"])
    assert list(limited["span_id"]) == list(whole["span_id"][:7])  # the oldest seven


def _assessments(process: MlflowProcess, trace_ids: list[str], name: str = "tlmscore.grounding",
                 ) -> list[dict[str, Any]]:
    """Every tlmscore feedback called `name` on the traces, as the server keeps it (other tests write others)."""
    found = []
    for start in range(0, len(trace_ids), 50):
        reply = httpx.get(f"{process.url}/api/3.0/mlflow/traces/batchGet",
                          params={"trace_ids": trace_ids[start:start + 50]}, timeout=60)
        reply.raise_for_status()
        found += [a for t in reply.json()["traces"] for a in t["trace_info"].get("assessments") or []
                  if a["source"]["source_id"] == "tlmscore" and a["assessment_name"] == name]
    return found


def _check(assessments: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """Exactly one feedback per row's span, and it says what the row says."""
    assert len(assessments) == len({(a["trace_id"], a["span_id"]) for a in assessments}) == len(rows)
    found = {a["span_id"]: a for a in assessments}
    for row in rows:
        assessment = found[row["span_id"]]
        assert (assessment["trace_id"], assessment["assessment_name"]) == (row["trace_id"], "tlmscore.grounding")
        assert assessment["source"] == {"source_type": "CODE", "source_id": "tlmscore"}
        label = assessment["metadata"]["label"]
        assert assessment["metadata"]["tlmscore.record.id"] == row["id"]
        if row["error"] or row["score"] is None:
            assert (label, assessment["feedback"]["value"]) == ("not scorable", "not scorable")
            assert assessment["rationale"] == (row["error"] or row["explanation"])
        else:
            assert assessment["feedback"]["value"] == pytest.approx(row["score"])
            assert label == ("supported" if row["score"] >= 0.5 else "unsupported")
            assert assessment["rationale"] == row["explanation"]


def _killing(process: MlflowProcess, at_post: int) -> Callable[[str, str], int | None]:
    """A proxy hook that kills the server as the `at_post`-th assessment arrives (before it is passed on)."""
    posts = {"count": 0}

    def before(method: str, path: str) -> int | None:
        if method == "POST" and path.endswith("/assessments"):
            posts["count"] += 1
            if posts["count"] == at_post:
                process.kill()
        return None

    return before


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tlmscore", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, check=False, timeout=600)


def test_read_score_annotate_kill_mid_write_restart_replay_one_assessment_per_span(
        recorded: Recorded, tmp_path: Path) -> None:
    spans = len(recorded.raw)
    out = tmp_path / "scored.jsonl"
    with StoreProxy(recorded.process.url, before=_killing(recorded.process, at_post=11)) as proxy:
        address = f"mlflow://{proxy.url.removeprefix('http://')}/{EXPERIMENT}"
        target = address.rsplit("/", 1)[0]
        done = _cli("score", address, "-o", str(out), "--offline", "--quiet", "--pages", str(LABELLED / "pages"),
                    "--cache-dir", str(tmp_path / "cache"), "--annotate")
        assert done.returncode == 0, done.stderr
        assert f"annotations to {target} (the rows' origin): 10 of {spans} written" in done.stderr
        assert f"rows 1-{spans}: {spans - 10} of {spans}: HTTP 502 Bad Gateway (after 3 attempts)" in done.stderr
        side = tmp_path / "scored.jsonl.annotate-failed.jsonl"
        kept = [json.loads(line) for line in side.read_text(encoding="utf-8").splitlines()]
        assert len(kept) == spans - 10 and {r["target"] for r in kept} == {target}

        recorded.process.start()  # the same database, the same port
        replayed = _cli("annotate", str(side))
        assert replayed.returncode == 0, replayed.stderr
        assert f"{spans - 10} of {spans - 10} written" in replayed.stderr
        assert not side.exists()
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == spans and all(r["origin"] == "mlflow" for r in rows)
    assert sum(r["score"] is not None for r in rows) > spans // 2
    _check(_assessments(recorded.process, [r["trace_id"] for r in rows]), rows)

    rows[0]["score"] = 0.123  # a re-run with a changed score updates the feedback, adds none
    changed = tmp_path / "changed.jsonl"
    changed.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["annotate", str(changed), "--to", recorded.process.address]) == 0
    _check(_assessments(recorded.process, [r["trace_id"] for r in rows]), rows)


def test_a_token_goes_only_to_the_server_it_is_for(recorded: Recorded, tmp_path: Path) -> None:
    rows = tlmscore.score(recorded.address, settings=_settings(tmp_path)).head(3)
    scored = tmp_path / "scored.jsonl"
    rows.to_json(scored, orient="records", lines=True)
    with StoreProxy(recorded.process.url) as configured, StoreProxy(recorded.process.url) as other:
        crafted = [json.loads(line) | {"source": f"mlflow://{other.url.removeprefix('http://')}/{EXPERIMENT}"}
                   for line in scored.read_text(encoding="utf-8").splitlines()]
        scored.write_text("".join(json.dumps(r) + "\n" for r in crafted), encoding="utf-8")
        done = _cli("annotate", str(scored), "--to", "origin",
                    env={"MLFLOW_TRACKING_TOKEN": TOKEN, "MLFLOW_TRACKING_URI": configured.url})
        assert done.returncode == 0, done.stderr
        assert "sent without MLFLOW_TRACKING_TOKEN" in done.stderr and TOKEN not in done.stderr
        assert other.keys and set(other.keys) == {None}  # an address read from the rows gets no key
        direct = _cli("annotate", str(scored), "--to", f"mlflow://{configured.url.removeprefix('http://')}",
                      env={"MLFLOW_TRACKING_TOKEN": TOKEN, "MLFLOW_TRACKING_URI": configured.url})
        assert direct.returncode == 0, direct.stderr
        assert configured.keys and set(configured.keys) == {f"Bearer {TOKEN}"}


def test_assessments_land_on_the_trace_and_span_ids_mlflow_itself_reports(recorded: Recorded, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=recorded.process.url)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    traces = client.search_traces(locations=[experiment.experiment_id], max_results=500)
    by_call = {span.inputs["model"]: (trace.info.trace_id, span.span_id) for trace in traces
               for span in trace.data.spans
               if isinstance(span.inputs, dict) and span.inputs.get("model") in recorded.raw}
    assert len(by_call) == len(recorded.raw)  # MLflow's own client: the ids of each call's LLM span
    calls = [t.request["model"] for t in read_transcripts(f"{recorded.address}?limit=6")]
    frame = tlmscore.score(f"{recorded.address}?limit=6", settings=_settings(tmp_path)).assign(scorer="ids")
    rows = frame.to_dict("records")
    assert [(r["trace_id"], r["span_id"]) for r in rows] == [by_call[c] for c in calls]
    scored = tmp_path / "scored.jsonl"
    frame.to_json(scored, orient="records", lines=True)
    assert main(["annotate", str(scored), "--to", recorded.process.address]) == 0
    found = _assessments(recorded.process, [by_call[c][0] for c in calls], name="tlmscore.ids")
    assert sorted((a["trace_id"], a["span_id"], a["metadata"]["tlmscore.record.id"]) for a in found) == sorted(
        (*by_call[c], r["id"]) for c, r in zip(calls, rows, strict=True))
