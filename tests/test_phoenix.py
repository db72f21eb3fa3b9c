"""OpenInference spans from a real Phoenix server, written by the real OpenAI instrumentation.

Every recorded response of the shared corpus is answered by a fake OpenAI server to the official
`openai` client under `openinference-instrumentation-openai`; its spans go to a real `phoenix
serve`. The rows read from the live server and from its span exports (Parquet, CSV, JSON lines)
must equal the rows of the same calls logged as raw records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tlmscore
from tests.openai_server import OpenAIServer
from tests.phoenix_server import PhoenixServer, phoenix_server, send_spans, wait_for_spans
from tlmscore.ingest import read_transcripts

__all__ = ["phoenix_server"]  # the fixture, imported to be used here

pytest.importorskip("openinference.instrumentation.openai", reason="the phoenix extra is not installed")
# The openai SDK warns while serialising the xAI responses it parsed into the nearest types.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "tlmscore-corpus"
SECRET = "phx-test-key-7f3a91c2"  # noqa: S105  (a made-up key the outputs are searched for)


@dataclass(frozen=True)
class Recorded:
    """The calls made under instrumentation, by model name, the export files and the server.

    `raw` holds each call as a record of the recorded response's file; `returned`, with the
    `Response` the `openai` client returned (which is what a program logs, and what the
    instrumentation serialises: the SDK may order an item's keys its own way).
    """

    raw: dict[str, dict[str, Any]]
    returned: dict[str, dict[str, Any]]
    exports: dict[str, Path]
    server: PhoenixServer


def _calls(folder: Path) -> dict[str, dict[str, Any]]:
    """A raw record per corpus response the API returns: the request that gets it, and the response."""
    calls: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        response = json.loads(path.read_text(encoding="utf-8"))
        stem = path.stem
        if response.get("object") == "chat.completion":
            request: dict[str, Any] = {"model": stem, "messages": [
                {"role": "system", "content": "Answer briefly."}, {"role": "user", "content": f"About {stem}?"}]}
        elif response.get("object") == "response":
            request = {"model": stem, "input": f"About {stem}?", "instructions": "Answer briefly."}
        else:
            continue  # an API error object: the API would not return it as a response
        calls[stem] = {"request": request, "response": response}
    return calls


@pytest.fixture(scope="module")
def recorded(phoenix_server: PhoenixServer, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    import openai
    from phoenix.client import Client

    corpus = ROOT.parent / "shared" / "corpus" / "responses"
    if not corpus.is_dir():
        pytest.skip(f"shared corpus not present at {corpus}")
    calls = _calls(corpus)
    with OpenAIServer(corpus) as fake, send_spans(phoenix_server.url, PROJECT):
        client = openai.OpenAI(base_url=fake.url, api_key="sk-fake", max_retries=0)
        returned: dict[str, dict[str, Any]] = {}
        for stem, call in calls.items():
            create = client.chat.completions.create if "messages" in call["request"] else client.responses.create
            returned[stem] = {"request": call["request"], "response": create(**call["request"])}
    wait_for_spans(phoenix_server.url, PROJECT, len(calls))
    frame = Client(base_url=phoenix_server.url).spans.get_spans_dataframe(project_identifier=PROJECT,
                                                                            limit=10_000)
    folder = tmp_path_factory.mktemp("exports")
    exports = {"parquet": folder / "spans.parquet", "csv": folder / "spans.csv", "jsonl": folder / "spans.jsonl"}
    frame.to_parquet(exports["parquet"])
    frame.to_csv(exports["csv"])
    frame.to_json(exports["jsonl"], orient="records", lines=True)
    return Recorded(calls, returned, exports, phoenix_server)


def _settings(tmp_path: Path) -> tlmscore.Settings:
    return tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache")


def _same_as_raw(source: str | Path, recorded: Recorded, tmp_path: Path) -> pd.DataFrame:
    """The rows of `source` beside the rows of the same calls logged raw: prompts and responses equal."""
    models = [t.request.get("model") for t in read_transcripts(source)]
    assert sorted(models) == sorted(recorded.raw), "one record per LLM span, one span per call"
    rows = tlmscore.prepare(source, _settings(tmp_path))
    raw = tlmscore.prepare([recorded.raw[str(m)] for m in models], _settings(tmp_path))
    returned = tlmscore.prepare([recorded.returned[str(m)] for m in models], _settings(tmp_path))
    assert rows["error"].isna().all()
    assert list(rows["prompt"]) == list(raw["prompt"])
    assert list(rows["response"]) == list(returned["response"])
    assert list(rows["model"]) == list(raw["model"])
    assert list(rows["response_status"]) == list(raw["response_status"])
    return rows


@pytest.mark.parametrize("kind", ["parquet", "csv", "jsonl"])
def test_a_span_export_reads_as_the_raw_records_do(recorded: Recorded, kind: str, tmp_path: Path) -> None:
    rows = _same_as_raw(recorded.exports[kind], recorded, tmp_path)
    assert set(rows["origin"]) == {"openinference"}
    assert rows["trace_id"].str.fullmatch(r"[0-9a-f]{32}").all()
    assert rows["span_id"].str.fullmatch(r"[0-9a-f]{16}").all()
    assert list(rows["id"]) == list(rows["span_id"])


def test_the_live_server_reads_as_the_raw_records_do(recorded: Recorded, tmp_path: Path) -> None:
    rows = _same_as_raw(f"{recorded.server.address}/{PROJECT}", recorded, tmp_path)
    assert set(rows["origin"]) == {"phoenix"}
    export = tlmscore.prepare(recorded.exports["parquet"], _settings(tmp_path))
    assert sorted(rows["span_id"]) == sorted(export["span_id"])


def test_the_live_server_read_a_few_spans_at_a_time_gives_the_same_rows_in_the_same_order(
        recorded: Recorded, tmp_path: Path) -> None:
    whole = tlmscore.prepare(f"{recorded.server.address}/{PROJECT}", _settings(tmp_path))
    rows = _same_as_raw(f"{recorded.server.address}/{PROJECT}?page=4", recorded, tmp_path)
    assert list(rows["span_id"]) == list(whole["span_id"])
    assert list(rows["prompt"]) == list(whole["prompt"])
    first = tlmscore.prepare(f"{recorded.server.address}/{PROJECT}?page=4&limit=5", _settings(tmp_path))
    assert list(first["span_id"]) == list(whole["span_id"][:5])  # the oldest five


def test_a_span_without_output_value_is_rebuilt_from_its_messages_with_a_warning(recorded: Recorded,
                                                                                 tmp_path: Path) -> None:
    frame = pd.read_parquet(recorded.exports["parquet"])
    chat = frame[frame["attributes.input.value"].str.contains("perplexity-text")].copy()
    chat["attributes.output.value"] = None
    path = tmp_path / "flattened.parquet"
    chat.to_parquet(path)
    rows = tlmscore.prepare(path, _settings(tmp_path))
    raw = tlmscore.prepare([recorded.raw["perplexity-text"]], _settings(tmp_path))
    assert rows["error"].isna().all()
    assert rows["response"][0] == raw["response"][0]
    assert any("built from llm.input_messages" in w for w in rows["warnings"][0])


def test_a_malformed_span_is_one_error_row_naming_file_and_row(recorded: Recorded, tmp_path: Path) -> None:
    lines = recorded.exports["jsonl"].read_text(encoding="utf-8").splitlines()
    span = json.loads(lines[0])
    span.update({"attributes.input.value": "{", "attributes.output.value": "not json",
                 "attributes.llm.input_messages": None, "attributes.llm.output_messages": None})
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[1], json.dumps(span), "[1, 2]", lines[2]]) + "\n", encoding="utf-8")
    rows = tlmscore.prepare(broken, _settings(tmp_path))
    assert len(rows) == 4
    assert rows["error"][0] is None and rows["error"][3] is None
    assert rows["error"][1].startswith(f"{broken}:2: span {span['context.span_id']}: LLM span has no JSON response")
    assert rows["error"][2] == f"{broken}:3: row must be a JSON object, not list"


def test_the_command_line_reads_a_window_of_the_live_server_and_never_writes_the_key(recorded: Recorded,
                                                                                     tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PHOENIX_API_KEY": SECRET}
    done = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", f"{recorded.server.address}/{PROJECT}",
                           "--limit", "3", "--since", "2000-01-01T00:00:00", "-o", str(out), "--offline",
                           "--quiet", "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, env=env, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3
    assert {r["origin"] for r in rows} == {"phoenix"}
    written = [p.read_text(encoding="utf-8", errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    assert all(SECRET not in text for text in [*written, done.stdout, done.stderr])


def test_an_unknown_project_is_an_unreadable_input(recorded: Recorded, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", f"{recorded.server.address}/no-such-project",
                           "-o", str(tmp_path / "rows.jsonl"), "--offline", "--quiet"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          check=False, timeout=300)
    assert done.returncode == 2
    assert "no-such-project" in done.stderr
