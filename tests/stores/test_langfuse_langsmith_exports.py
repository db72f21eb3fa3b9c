"""Langfuse observation exports and LangSmith run exports, written from what the real SDKs send.

Every recorded response (`fixtures/responses/`, and the shared corpus's when present) is answered by
a fake OpenAI server to the official `openai` client wrapped by both `langfuse.openai` and
`langsmith.wrappers.wrap_openai` (in a process of its own: `tests/servers/trace_store_calls.py`).

No Langfuse or LangSmith server can run here (Langfuse's needs Postgres, ClickHouse and Redis;
LangSmith's is not published), so both SDKs send to a local loopback stand-in
(`tests/servers/trace_store_server.py`) that captures what they send: the Langfuse SDK's OTLP spans and the
LangSmith SDK's run batches. What the servers would make of them is written here, after their
published documents:

- Langfuse's blob-storage export, `observations_v2/` rows (snake_case, timestamps
  `YYYY-MM-DD HH:MM:SS.ffffff` UTC; Parquet, JSON lines, gzipped JSON lines, CSV): "Blob storage
  export field reference", https://langfuse.com/docs/api-and-data-platform/features/blob-storage-export-fields
- Langfuse's UI and public API export (camelCase `traceId`, `startTime`, `model`, `modelParameters`;
  input and output as JSON values): the `Observation` object of the public API reference,
  https://api.reference.langfuse.com (`GET /api/public/observations`)
- LangSmith runs (`id`, `name`, `run_type`, `inputs`, `outputs`, `trace_id`, `dotted_order`, …):
  "Run (span) data format", https://docs.smith.langchain.com/reference/data_formats/run_data_format

The rows must equal the rows of the same calls logged as raw records, or say in their warnings what
the store did not keep.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import gzip
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tlmscore
from tests.servers.openai_server import OpenAIServer
from tests.servers.trace_store_calls import corpus_calls
from tests.servers.trace_store_fakes import LANGSMITH_KEY as FAKE_LANGSMITH_KEY
from tests.servers.trace_store_fakes import PUBLIC_KEY, SECRET_KEY, Store, serve_langfuse, serve_langsmith
from tests.servers.trace_store_server import TraceStoreServer
from tests.support.paths import ROOT
from tlmscore import read_transcripts
from tlmscore.cli import main
from tlmscore.stores import READERS as REGISTRY
from tlmscore.stores import find_reader

pytest.importorskip("langfuse", reason="langfuse (the dev extra) is not installed")
pytest.importorskip("langsmith", reason="langsmith (the dev extra) is not installed")
# The openai SDK warns while serialising the xAI responses it parsed into the nearest types.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

LANGFUSE_SECRET = "sk-lf-test-5c1e0b7d9a"  # noqa: S105  (made-up keys the outputs are searched for)
LANGSMITH_KEY = "lsv2_pt_test_8e2f4a61c3"
LANGFUSE_PUBLIC = "pk-lf-test-2b9d"


@dataclass(frozen=True)
class Captured:
    """The calls made, as raw records and as the client returned them, and the export files written."""

    raw: dict[str, dict[str, Any]]
    returned: dict[str, dict[str, Any]]
    langfuse: dict[str, Path]
    langsmith: dict[str, Path]
    store: TraceStoreServer


def _attributes(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    return {p["key"]: next(iter(p["value"].values()), None) for p in pairs}


def _hex(value: str | None) -> str:
    return base64.b64decode(value).hex() if value else ""


def _time(nanos: str | None) -> str | None:
    if nanos is None:
        return None
    moment = dt.datetime.fromtimestamp(int(nanos) / 1e9, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _observation(span: dict[str, Any]) -> dict[str, Any]:
    """A span the Langfuse SDK sent as the blob-storage export's `observations_v2` row holds it (the field
    reference named in the module docstring: the `langfuse.observation.*` attributes are the SDK's)."""
    attrs = _attributes(span.get("attributes") or [])
    prefix = "langfuse.observation.metadata."
    usage = json.loads(attrs.get("langfuse.observation.usage_details") or "{}")
    return {"id": _hex(span["spanId"]), "trace_id": _hex(span["traceId"]), "project_id": "proj-test",
            "environment": attrs.get("langfuse.environment") or "default",
            "type": str(attrs.get("langfuse.observation.type") or "span").upper(),
            "parent_observation_id": _hex(span.get("parentSpanId")), "start_time": _time(span["startTimeUnixNano"]),
            "end_time": _time(span.get("endTimeUnixNano")), "name": span["name"],
            "metadata": {k.removeprefix(prefix): str(v) for k, v in attrs.items() if k.startswith(prefix)},
            "level": attrs.get("langfuse.observation.level") or "DEFAULT",
            "status_message": attrs.get("langfuse.observation.status_message") or "", "version": "",
            "input": attrs.get("langfuse.observation.input") or "",
            "output": attrs.get("langfuse.observation.output") or "",
            "provided_model_name": attrs.get("langfuse.observation.model.name") or "",
            "model_parameters": attrs.get("langfuse.observation.model.parameters") or "",
            "usage_details": {k: v for k, v in usage.items() if isinstance(v, int)}}


def _ui_observation(row: dict[str, Any]) -> dict[str, Any]:
    """The same observation as the UI and public API export it (the API reference's `Observation`):
    camelCase, payloads as JSON values."""
    def value(text: str) -> Any:
        return json.loads(text) if text else None

    return {"id": row["id"], "traceId": row["trace_id"], "type": row["type"], "name": row["name"],
            "startTime": row["start_time"], "endTime": row["end_time"], "level": row["level"],
            "parentObservationId": row["parent_observation_id"] or None, "metadata": row["metadata"],
            "input": value(row["input"]), "output": value(row["output"]),
            "model": row["provided_model_name"] or None, "modelParameters": value(row["model_parameters"])}


def _runs(store: TraceStoreServer) -> list[dict[str, Any]]:
    """The runs the LangSmith SDK sent, each post merged with its patches, in the run data format (as its
    document lists the fields)."""
    runs: dict[str, dict[str, Any]] = {}
    for op in [*store.run_posts, *store.run_patches]:
        runs.setdefault(op["id"], {}).update(op)
    keys = ("id", "name", "run_type", "start_time", "end_time", "inputs", "outputs", "error", "extra", "events",
            "tags", "trace_id", "dotted_order", "parent_run_id", "session_name")
    return sorted(({k: run.get(k) for k in keys} for run in runs.values()), key=lambda r: str(r["start_time"]))


def _write_tables(rows: list[dict[str, Any]], folder: Path, stem: str) -> dict[str, Path]:
    """Parquet and CSV (objects and arrays as JSON text), JSON lines (and gzipped), and a JSON array."""
    def cells(row: dict[str, Any]) -> dict[str, Any]:
        return {k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in row.items()}

    paths = {kind: folder / f"{stem}.{kind}" for kind in ("parquet", "jsonl", "csv", "json")}
    pd.DataFrame([cells(row) for row in rows]).to_parquet(paths["parquet"])
    paths["jsonl"].write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    paths["jsonl.gz"] = folder / f"{stem}.jsonl.gz"  # the blob-storage export's gzip option
    paths["jsonl.gz"].write_bytes(gzip.compress(paths["jsonl"].read_bytes()))
    paths["json"].write_text(json.dumps(rows), encoding="utf-8")
    with paths["csv"].open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(cells(row) for row in rows)
    return paths


def _env(store: TraceStoreServer) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "LANGFUSE_PUBLIC_KEY": LANGFUSE_PUBLIC,
            "LANGFUSE_SECRET_KEY": LANGFUSE_SECRET, "LANGFUSE_HOST": store.root, "LANGFUSE_BASE_URL": store.root,
            "LANGSMITH_API_KEY": LANGSMITH_KEY, "LANGSMITH_ENDPOINT": store.root, "LANGSMITH_TRACING": "true",
            "LANGSMITH_PROJECT": "tlmscore-test"}


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory, recorded_responses: Path) -> Captured:
    folder = tmp_path_factory.mktemp("stores")
    with OpenAIServer(recorded_responses) as fake, TraceStoreServer() as store:
        done = subprocess.run([sys.executable, "-m", "tests.servers.trace_store_calls", str(recorded_responses),
                               fake.url, str(folder)],
                              capture_output=True, text=True, env=_env(store), check=False, timeout=600, cwd=ROOT)
        assert done.returncode == 0, done.stderr
    returned = json.loads((folder / "returned.json").read_text(encoding="utf-8"))
    observations = sorted((_observation(span) for span in store.spans), key=lambda o: str(o["start_time"]))
    langfuse = _write_tables(observations, folder, "observations")
    langfuse["json"].write_text(json.dumps([_ui_observation(o) for o in observations]), encoding="utf-8")
    langsmith = _write_tables(_runs(store), folder, "runs")
    return Captured(corpus_calls(recorded_responses), returned, langfuse, langsmith, store)


def _settings(tmp_path: Path) -> tlmscore.Settings:
    return tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache")


def _beside_raw(path: Path, captured: Captured, tmp_path: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The rows of an export, and of the same calls as raw records and as the records of what the client returned."""
    models = list(captured.raw)  # the calls were made one after another, in this order
    assert len(list(read_transcripts(path))) == len(models), "one record per LLM call, none for the span or chain"
    rows = tlmscore.prepare(path, _settings(tmp_path))
    raw = tlmscore.prepare([captured.raw[m] for m in models], _settings(tmp_path))
    returned = tlmscore.prepare([{"request": captured.raw[m]["request"], "response": captured.returned[m]}
                                 for m in models], _settings(tmp_path))
    assert rows["error"].isna().all(), list(rows["error"].dropna())
    return rows, raw, returned


def _as_langfuse_keeps(call: dict[str, Any]) -> dict[str, Any]:
    """A raw record with only what Langfuse's OpenAI integration keeps of its response."""
    response = call["response"]
    if response.get("object") == "chat.completion":
        kept: dict[str, Any] = {"object": "chat.completion", "model": response.get("model"), "choices": [
            {"index": c["index"], "message": c["message"], "finish_reason": "stop"} for c in response["choices"]]}
    else:
        kept = {"object": "response", "model": response.get("model"), "output": response["output"],
                "status": "completed"}
    return {"request": call["request"], "response": kept}


MEDIA_LOST = "Langfuse keeps base64 media apart"
_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,")


def _loss(call: dict[str, Any]) -> str:
    """What of this call a Langfuse export cannot hold, should its prompt differ: the warning that names it."""
    if _DATA_URL.search(json.dumps(call)):
        return MEDIA_LOST
    if call["response"].get("object") == "chat.completion":
        return "provider fields (citations, search_results) are lost"
    return "the tools it echoes are lost"


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "jsonl.gz", "csv", "json"])
def test_a_langfuse_export_reads_as_the_raw_records_do_or_says_what_it_lost(captured: Captured, kind: str,
                                                                          tmp_path: Path) -> None:
    path = captured.langfuse[kind]
    assert find_reader(str(path)) is REGISTRY["langfuse"]
    rows, raw, returned = _beside_raw(path, captured, tmp_path)
    calls = list(captured.raw.values())
    kept = tlmscore.prepare([_as_langfuse_keeps(c) for c in calls], _settings(tmp_path))
    assert list(rows["response"]) == list(returned["response"])
    assert list(rows["model"]) == list(raw["model"])
    for call, prompt, kept_prompt, status, got, warnings, row_status in zip(
            calls, raw["prompt"], kept["prompt"], raw["response_status"], rows["prompt"], rows["warnings"],
            rows["response_status"], strict=True):
        said, loss, name = " ".join(warnings), _loss(call), call["request"]["model"]
        if loss == MEDIA_LOST:  # a media reference (the SDK's own id) where the data was
            assert got != prompt and loss in said, name
        else:
            assert got == kept_prompt, name  # each call shows exactly what Langfuse keeps of it
            assert got == prompt or loss in said, name  # and what it lost is named
        assert status == row_status or "(read as completed)" in said or "(read as stop)" in said
    differ = [got != prompt for got, prompt in zip(rows["prompt"], raw["prompt"], strict=True)]
    assert any(differ) and not all(differ)  # calls that lose what their prompt shows, and calls that lose nothing
    assert set(rows["origin"]) == {"langfuse"}
    assert rows["trace_id"].str.fullmatch(r"[0-9a-f]{32}").all()
    assert rows["span_id"].str.fullmatch(r"[0-9a-f]{16}").all()
    assert list(rows["id"]) == list(rows["span_id"])
    spans = {_hex(s["spanId"]) for s in captured.store.spans}
    assert set(rows["span_id"]) < spans  # the observation ids, the span ("answer") not among the rows


@pytest.mark.parametrize("kind", ["parquet", "jsonl", "jsonl.gz", "csv", "json"])
def test_a_langsmith_export_reads_as_the_raw_records_do(captured: Captured, kind: str, tmp_path: Path) -> None:
    path = captured.langsmith[kind]
    assert find_reader(str(path)) is REGISTRY["langsmith"]
    rows, raw, returned = _beside_raw(path, captured, tmp_path)
    assert list(rows["prompt"]) == list(raw["prompt"])
    assert list(rows["response"]) == list(returned["response"])
    assert list(rows["model"]) == list(raw["model"])
    assert list(rows["response_status"]) == list(raw["response_status"])
    assert [t.request["model"] for t in read_transcripts(path)] == list(captured.raw)
    assert set(rows["origin"]) == {"langsmith"}
    runs = {r["id"]: r for r in _runs(captured.store)}
    assert list(rows["id"]) == list(rows["span_id"])
    assert all(runs[rid]["run_type"] == "llm" for rid in rows["span_id"])
    assert list(rows["trace_id"]) == [runs[rid]["trace_id"] for rid in rows["span_id"]]
    assert any(r["run_type"] == "chain" for r in runs.values())


def _annotated(scored: Path, target: str, store: Store) -> list[dict[str, Any]]:
    assert main(["annotate", str(scored), "--to", target]) == 0
    return list(store.stored.values())


def test_langfuse_scores_land_on_the_trace_and_observation_the_sdk_sent(captured: Captured, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids by value: the SDK's own OTLP spans (decoded here) against the score bodies the fake received."""
    generations = sorted((_observation(s) for s in captured.store.spans
                          if _observation(s)["type"] == "GENERATION"), key=lambda o: str(o["start_time"]))
    assert len(generations) == len(captured.raw)  # one a call, in the order the calls were made
    scored = tmp_path / "scored.jsonl"
    tlmscore.score(captured.langfuse["parquet"], settings=_settings(tmp_path)).to_json(scored, orient="records",
                                                                                         lines=True)
    rows = [json.loads(line) for line in scored.read_text(encoding="utf-8").splitlines()]
    for store in serve_langfuse():
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET_KEY)
        scores = {s["metadata"]["tlmscore.record.id"]: s for s in _annotated(scored, f"langfuse:{store.url}", store)}
    assert [(scores[r["id"]]["traceId"], scores[r["id"]]["observationId"]) for r in rows] == [
        (g["trace_id"], g["id"]) for g in generations]


def test_langsmith_feedback_lands_on_the_trace_and_run_the_sdk_sent(captured: Captured, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids by value: the SDK's own run posts against the feedback bodies the fake received."""
    llm_runs = [r for r in _runs(captured.store) if r["run_type"] == "llm"]  # by start time: the calls' order
    assert len(llm_runs) == len(captured.raw)
    scored = tmp_path / "scored.jsonl"
    tlmscore.score(captured.langsmith["parquet"], settings=_settings(tmp_path)).to_json(scored, orient="records",
                                                                                          lines=True)
    rows = [json.loads(line) for line in scored.read_text(encoding="utf-8").splitlines()]
    for store in serve_langsmith():
        monkeypatch.setenv("LANGSMITH_API_KEY", FAKE_LANGSMITH_KEY)
        monkeypatch.setenv("LANGSMITH_ENDPOINT", store.url)  # the server the key is for
        feedback = {f["feedback_source"]["metadata"]["tlmscore.record.id"]: f
                    for f in _annotated(scored, "langsmith", store)}
    assert [(feedback[r["id"]]["trace_id"], feedback[r["id"]]["run_id"]) for r in rows] == [
        (str(run["trace_id"]), str(run["id"])) for run in llm_runs]


def test_the_langfuse_records_say_what_the_integration_did_not_keep(captured: Captured) -> None:
    records = list(read_transcripts(captured.langfuse["jsonl"]))
    said = {stem: " ".join(t.warnings) for stem, t in zip(captured.raw, records, strict=True)}
    responses = [m for m, call in captured.raw.items() if "input" in call["request"]]
    chats = [m for m, call in captured.raw.items() if "messages" in call["request"]]
    assert responses and chats
    for stem in responses:
        assert "its id, status (read as completed), incomplete_details and the tools it echoes are lost" in said[stem]
        assert "instructions: Langfuse folds them into the input as its leading system message" in said[stem]
    for stem in chats:
        assert "finish_reason (read as stop) and provider fields (citations, search_results) are lost" in said[stem]


def test_a_streamed_responses_call_keeps_its_status_and_id_in_the_metadata(tmp_path: Path) -> None:
    """A streamed call's generation holds the Response's other fields in `metadata` (`langfuse.openai`)."""
    output = {"type": "message", "id": "msg_1", "role": "assistant", "status": "incomplete",
              "content": [{"type": "output_text", "text": "Partial", "annotations": []}]}
    row = {"id": "00000000000000aa", "trace_id": "0" * 30 + "bb", "type": "GENERATION", "name": "OpenAI-generation",
           "input": json.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]),
           "output": json.dumps(output),
           "provided_model_name": "gpt-test", "metadata": {
               "id": '"resp_7"', "status": '"incomplete"', "object": '"response"',
               "incomplete_details": json.dumps({"reason": "max_output_tokens"}), "instructions": '"Be brief."'}}
    path = tmp_path / "observations.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    rows = tlmscore.prepare(path, _settings(tmp_path))
    assert rows["error"][0] is None
    assert rows["response_id"][0] == "resp_7"
    assert rows["response_status"][0] == "incomplete:max_output_tokens"
    assert rows["prompt"][0] == "System: Be brief.\n\nUser: Hi?\n\nAssistant:"
    assert not [w for w in rows["warnings"][0] if "Langfuse" in w]  # nothing lost: no warning from the reader
    record = next(iter(read_transcripts(path)))
    assert record.request["instructions"] == "Be brief."  # taken back out of the input
    assert record.request["input"] == [{"role": "user", "content": "Hi?"}]
    assert (rows["trace_id"][0], rows["span_id"][0], rows["id"][0]) == (row["trace_id"], row["id"], row["id"])


def test_a_streamed_chat_call_keeps_its_finish_reason(tmp_path: Path) -> None:
    """`langfuse.openai` logs a streamed chat call's text as the output and its finish reason in `metadata`."""
    row = {"id": "cc", "traceId": "dd", "type": "GENERATION", "model": "gpt-test", "output": "Cut off",
           "input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
           "metadata": {"finish_reason": "length"}}
    path = tmp_path / "observations.json"
    path.write_text(json.dumps([row, {**row, "id": "ce", "type": "SPAN"}]), encoding="utf-8")
    records = list(read_transcripts(path))
    assert len(records) == 1
    rows = tlmscore.prepare(path, _settings(tmp_path))
    assert rows["response"][0] == "Cut off"
    assert rows["response_status"][0] == "incomplete:max_output_tokens"
    assert rows["prompt"][0] == "System: Be brief.\n\nUser: Hi?\n\nAssistant:"
    assert "its id and provider fields (citations, search_results) are lost" in " ".join(rows["warnings"][0])


def test_media_the_sdk_uploaded_apart_is_named_as_lost(captured: Captured) -> None:
    """The SDK uploads a base64 data URL (the code interpreter's image here) and leaves a media reference."""
    records = dict(zip(captured.raw, read_transcripts(captured.langfuse["jsonl"]), strict=True))
    with_images = [stem for stem, call in captured.raw.items() if "data:image/" in json.dumps(call["response"])]
    assert with_images
    for stem, record in records.items():
        said = [w for w in record.warnings if "Langfuse keeps base64 media apart" in w]
        assert bool(said) == (stem in with_images), stem
        if said:
            assert "image/png" in said[0] and "@@@langfuseMedia" in json.dumps(record.response)


def test_a_text_input_reads_as_the_user_message_whether_stored_as_json_or_as_it_is(tmp_path: Path) -> None:
    output = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Yes."}]}
    row = {"id": "ab", "trace_id": "cd", "type": "GENERATION", "output": json.dumps(output),
           "provided_model_name": "gpt-test"}
    path = tmp_path / "observations.csv"
    pd.DataFrame([{**row, "input": json.dumps("Is 42 even?")}, {**row, "id": "ac", "input": "42"}]).to_csv(path)
    rows = tlmscore.prepare(path, _settings(tmp_path))
    response = {"object": "response", "status": "completed", "output": [output]}
    raw = tlmscore.prepare([{"request": {"model": "gpt-test", "input": text}, "response": response}
                            for text in ("Is 42 even?", "42")], _settings(tmp_path))
    assert list(rows["prompt"]) == list(raw["prompt"]) == ["Is 42 even?", "42"]
    assert not any("folds" in w for ws in rows["warnings"] for w in ws)  # no instructions were folded in


def test_malformed_and_failed_rows_are_one_error_row_each_naming_file_and_row(captured: Captured,
                                                                              tmp_path: Path) -> None:
    lines = captured.langfuse["jsonl"].read_text(encoding="utf-8").splitlines()
    generations = [line for line in lines if json.loads(line)["type"] == "GENERATION"]
    failed = {**json.loads(generations[0]), "output": "", "level": "ERROR", "status_message": "Error code: 429"}
    broken = tmp_path / "observations.jsonl"
    broken.write_text("\n".join([generations[1], "{not json", json.dumps(failed), "[1]", generations[2]]) + "\n",
                      encoding="utf-8")
    rows = tlmscore.prepare(broken, _settings(tmp_path))
    assert len(rows) == 5
    assert rows["error"][0] is None and rows["error"][4] is None
    assert rows["error"][1].startswith(f"{broken}:2: invalid JSON")
    assert rows["error"][2] == f"{broken}:3: observation {failed['id']}: the LLM call failed: Error code: 429"
    assert rows["error"][3] == f"{broken}:4: row must be a JSON object, not list"

    runs = [r for r in _runs(captured.store) if r["run_type"] == "llm"]
    errored = {**runs[0], "outputs": None, "error": "RateLimitError('Error code: 429')\n\nTraceback (most recent…"}
    chain_like = {**runs[1], "outputs": {"generations": []}}
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (errored, chain_like, runs[2])) + "\n", encoding="utf-8")
    rows = tlmscore.prepare(path, _settings(tmp_path))
    assert len(rows) == 3
    assert rows["error"][0] == f"{path}:1: run {runs[0]['id']}: the LLM call failed: RateLimitError('Error code: 429')"
    assert rows["error"][1].startswith(f"{path}:2: run {runs[1]['id']}: run outputs hold no Response")
    assert rows["error"][2] is None


def test_format_forces_the_reader_and_the_keys_never_reach_an_output(captured: Captured, tmp_path: Path) -> None:
    renamed = tmp_path / "export.data"
    renamed.write_bytes(captured.langsmith["parquet"].read_bytes())
    done_outputs: list[str] = []
    for name, path in (("langfuse", captured.langfuse["csv"]), ("langsmith", renamed)):
        out = tmp_path / f"{name}.jsonl"
        done = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", str(path), "--format", name, "-o",
                               str(out), "--offline", "--cache-dir", str(tmp_path / "cache")],
                              capture_output=True, text=True, env=_env(captured.store), check=False, timeout=300)
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert len(rows) == len(captured.raw)
        assert {r["origin"] for r in rows} == {name}
        done_outputs += [done.stdout, done.stderr]
    sent = json.dumps(captured.store.headers)
    assert LANGSMITH_KEY in sent  # the SDKs did hold the keys (sent as credentials to the store)
    assert base64.b64encode(f"{LANGFUSE_PUBLIC}:{LANGFUSE_SECRET}".encode()).decode() in sent
    exports = [*captured.langfuse.values(), *captured.langsmith.values()]
    written = [p.read_text(encoding="utf-8", errors="replace") for p in [*tmp_path.rglob("*"), *exports] if p.is_file()]
    for key in (LANGFUSE_SECRET, LANGSMITH_KEY):
        assert all(key not in text for text in [*written, *done_outputs])
