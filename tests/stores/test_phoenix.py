"""A real Phoenix server (`phoenix serve`) as a source and as a write-back target.

The calls are the project's own fixtures: every labelled Responses call (four times over, so that
write-back takes two requests) and the Chat Completions calls of the fixtures; the shared
corpus's recorded responses are added when it is beside the clone. A fake OpenAI server answers
them to the official `openai` client under the real `openinference-instrumentation-openai`, whose
spans go to the real server. The rows read from the live server and from its span exports
(Parquet, CSV, JSON lines) must equal the rows of the same calls logged as raw records; the rows
scored are written back as span annotations, read back through `arize-phoenix-client`, through a
server killed in the middle of the write and started again.

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

import pandas as pd
import pytest

import tlmscore
from tests.servers.openai_server import OpenAIServer
from tests.servers.phoenix_server import (
    PhoenixProcess,
    PhoenixServer,
    phoenix_process,  # noqa: F401  (the fixture `phoenix`: a server of this module's)
    send_spans,
    wait_for_spans,
)
from tests.servers.store_proxy import StoreProxy
from tests.support.paths import ROOT
from tlmscore import read_transcripts
from tlmscore.cli import main

pytest.importorskip("phoenix.server.main", reason="the Phoenix server is not installed: pip install -e '.[dev]'")
pytest.importorskip("openinference.instrumentation.openai", reason="the OpenInference instrumentation is not installed")
# The openai SDK warns while serialising provider responses it parsed into the nearest types.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FIXTURES = ROOT / "fixtures"
LABELLED = FIXTURES / "labelled"
CORPUS = ROOT.parent / "shared" / "corpus" / "responses"
PROJECT = "tlmscore-fixtures"
COPIES = 4  # 107 spans with the Chat Completions calls: write-back takes two requests of 100
SECRET = "phx-test-key-7f3a91c2"  # noqa: S105  (a made-up key the outputs are searched for)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("{")]


def _calls() -> dict[str, dict[str, Any]]:
    """A raw record per call, by a name that is also the model the fake answers for.

    Every labelled call COPIES times; every Chat Completions call of the fixtures; the shared
    corpus's responses when it is there.
    """
    calls: dict[str, dict[str, Any]] = {}
    labelled = _records(LABELLED / "labelled.jsonl")
    for copy in range(COPIES):
        for record in labelled:
            name = f"{record['id']}.{copy}"
            calls[name] = {"request": {**record["request"], "model": name}, "response": record["response"]}
    for path in ("citations.jsonl", "fidelity.jsonl", "items.jsonl"):
        for record in _records(FIXTURES / path):
            if (record.get("response") or {}).get("object") == "chat.completion":
                calls[record["id"]] = {"request": {**record["request"], "model": record["id"]},
                                       "response": record["response"]}
    for path in sorted(CORPUS.glob("*.json")) if CORPUS.is_dir() else []:
        response = json.loads(path.read_text(encoding="utf-8"))
        name = f"corpus-{path.stem}"
        if response.get("object") == "chat.completion":
            request: dict[str, Any] = {"model": name, "messages": [
                {"role": "system", "content": "Answer briefly."}, {"role": "user", "content": f"About {path.stem}?"}]}
        elif response.get("object") == "response":
            request = {"model": name, "input": f"About {path.stem}?", "instructions": "Answer briefly."}
        else:
            continue  # an API error object: the API would not return it as a response
        calls[name] = {"request": request, "response": response}
    return calls


@dataclass(frozen=True)
class Recorded:
    """The calls made under instrumentation, by name, the export files and the server.

    `raw` holds each call as its record; `returned`, with the `Response` the `openai` client
    returned (which is what a program logs, and what the instrumentation serialises: the SDK may
    order an item's keys its own way).
    """

    raw: dict[str, dict[str, Any]]
    returned: dict[str, dict[str, Any]]
    exports: dict[str, Path]
    server: PhoenixServer
    process: PhoenixProcess

    @property
    def address(self) -> str:
        return f"{self.server.address}/{PROJECT}"


@pytest.fixture(scope="module")
def recorded(phoenix: PhoenixProcess, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    import openai
    from phoenix.client import Client

    calls = _calls()
    answers = tmp_path_factory.mktemp("answers")
    for name, call in calls.items():
        (answers / f"{name}.json").write_text(json.dumps(call["response"]), encoding="utf-8")
    with OpenAIServer(answers) as fake, send_spans(phoenix.server.url, PROJECT):
        client = openai.OpenAI(base_url=fake.url, api_key="sk-fake", max_retries=0)
        returned: dict[str, dict[str, Any]] = {}
        for name, call in calls.items():
            create = client.chat.completions.create if "messages" in call["request"] else client.responses.create
            returned[name] = {"request": call["request"], "response": create(**call["request"])}
    wait_for_spans(phoenix.server.url, PROJECT, len(calls))
    frame = Client(base_url=phoenix.server.url).spans.get_spans_dataframe(project_identifier=PROJECT, limit=10_000)
    folder = tmp_path_factory.mktemp("exports")
    exports = {"parquet": folder / "spans.parquet", "csv": folder / "spans.csv", "jsonl": folder / "spans.jsonl"}
    frame.to_parquet(exports["parquet"])
    frame.to_csv(exports["csv"])
    frame.to_json(exports["jsonl"], orient="records", lines=True)
    return Recorded(calls, returned, exports, phoenix.server, phoenix)


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
    rows = _same_as_raw(recorded.address, recorded, tmp_path)
    assert set(rows["origin"]) == {"phoenix"}
    export = tlmscore.prepare(recorded.exports["parquet"], _settings(tmp_path))
    assert sorted(rows["span_id"]) == sorted(export["span_id"])


def test_the_live_server_is_paged_with_its_cursor_each_span_once_oldest_first(recorded: Recorded,
                                                                               tmp_path: Path) -> None:
    whole = tlmscore.prepare(recorded.address, _settings(tmp_path))
    with StoreProxy(recorded.server.url) as proxy:
        address = f"phoenix://{proxy.url.removeprefix('http://')}/{PROJECT}"
        rows = _same_as_raw(f"{address}?page=16", recorded, tmp_path)
        pages = [path for method, path in proxy.seen if path.startswith(f"/v1/projects/{PROJECT}/spans")]
        assert len(pages) == 2 * math.ceil(len(recorded.raw) / 16)  # read twice by _same_as_raw: once per page
        assert sorted(proxy.spans_served) == sorted(list(rows["span_id"]) * 2)  # every span once per reading
        proxy.clear()
        first = tlmscore.prepare(f"{address}?page=16&limit=5", _settings(tmp_path))
        assert [path for _, path in proxy.seen if "/spans" in path] == [
            f"/v1/projects/{PROJECT}/spans?sort=start_time&order=asc&span_kind=LLM&limit=5"]
    assert list(rows["span_id"]) == list(whole["span_id"])
    assert list(rows["prompt"]) == list(whole["prompt"])
    assert list(first["span_id"]) == list(whole["span_id"][:5])  # the oldest five
    started = pd.read_parquet(recorded.exports["parquet"]).sort_values("start_time")
    assert list(whole["span_id"]) == list(started["context.span_id"])  # oldest first


def test_a_span_without_output_value_is_rebuilt_from_its_messages_with_a_warning(recorded: Recorded,
                                                                                 tmp_path: Path) -> None:
    frame = pd.read_parquet(recorded.exports["parquet"])
    chat = frame[frame["attributes.input.value"].str.contains('"chat-length-ar"')].copy()
    chat["attributes.output.value"] = None
    path = tmp_path / "flattened.parquet"
    chat.to_parquet(path)
    rows = tlmscore.prepare(path, _settings(tmp_path))
    raw = tlmscore.prepare([recorded.raw["chat-length-ar"]], _settings(tmp_path))
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


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tlmscore", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, check=False, timeout=600)


def test_the_command_line_reads_a_window_of_the_live_server_and_never_writes_the_key(recorded: Recorded,
                                                                                     tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    with StoreProxy(recorded.server.url) as proxy:
        address = f"phoenix://{proxy.url.removeprefix('http://')}/{PROJECT}"
        done = _cli("prepare", address, "--limit", "3", "--since", "2000-01-01T00:00:00", "-o", str(out), "--offline",
                    "--quiet", "--cache-dir", str(tmp_path / "cache"), env={"PHOENIX_API_KEY": SECRET})
    assert done.returncode == 0, done.stderr
    assert set(proxy.keys) == {f"Bearer {SECRET}"}  # the one server the command line names: the key is for it
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3
    assert {r["origin"] for r in rows} == {"phoenix"}
    written = [p.read_text(encoding="utf-8", errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    assert all(SECRET not in text for text in [*written, done.stdout, done.stderr])


def test_an_unknown_project_is_one_line_exit_2_before_any_work(recorded: Recorded, tmp_path: Path) -> None:
    done = _cli("prepare", f"{recorded.server.address}/no-such-project", "-o", str(tmp_path / "rows.jsonl"),
                "--offline", "--quiet")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"tlmscore: error: {recorded.server.url}: no project 'no-such-project' on this Phoenix server"]
    assert list(tmp_path.iterdir()) == []


def _annotations(recorded: Recorded, span_ids: list[str], name: str = "tlmscore.grounding") -> list[dict[str, Any]]:
    """The annotations called `name` on the spans (other tests write others)."""
    from phoenix.client import Client

    client = Client(base_url=recorded.server.url)
    return [dict(a) for start in range(0, len(span_ids), 100)
            for a in client.spans.get_span_annotations(span_ids=span_ids[start:start + 100],
                                                       project_identifier=PROJECT, limit=1000)
            if a["name"] == name]


def _check(annotations: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """Exactly one annotation per row's span, and it says what the row says."""
    assert len(annotations) == len({a["span_id"] for a in annotations}) == len(rows)
    found = {a["span_id"]: a for a in annotations}
    for row in rows:
        annotation = found[row["span_id"]]
        assert (annotation["name"], annotation["annotator_kind"]) == ("tlmscore.grounding", "CODE")
        assert annotation["metadata"] == {"tlmscore.record.id": row["id"]}
        result = annotation["result"]
        if row["error"] or row["score"] is None:
            assert (result["label"], result.get("score")) == ("not scorable", None)
            assert result["explanation"] == (row["error"] or row["explanation"])
        else:
            assert result["score"] == pytest.approx(row["score"])
            assert result["label"] == ("supported" if row["score"] >= 0.5 else "unsupported")
            assert result["explanation"] == row["explanation"]


def _killing(process: PhoenixProcess, at_post: int) -> Callable[[str, str], int | None]:
    """A proxy hook that kills the server as the `at_post`-th annotation request arrives (before it is passed on)."""
    posts = {"count": 0}

    def before(method: str, path: str) -> int | None:
        if method == "POST" and path.startswith("/v1/span_annotations"):
            posts["count"] += 1
            if posts["count"] == at_post:
                process.kill()
        return None

    return before


def test_read_score_annotate_kill_mid_write_restart_replay_one_annotation_per_span(
        recorded: Recorded, tmp_path: Path) -> None:
    spans = len(recorded.raw)
    out = tmp_path / "scored.jsonl"
    with StoreProxy(recorded.server.url, before=_killing(recorded.process, at_post=2)) as proxy:
        address = f"phoenix://{proxy.url.removeprefix('http://')}/{PROJECT}"
        done = _cli("score", address, "-o", str(out), "--offline", "--quiet", "--pages", str(LABELLED / "pages"),
                    "--cache-dir", str(tmp_path / "cache"), "--annotate")
        assert done.returncode == 0, done.stderr
        assert f"annotations to {address.rsplit('/', 1)[0]} (the rows' origin): 100 of {spans} written" in done.stderr
        assert "gave up after 3 failed attempts in a row (last: HTTP 502 Bad Gateway)" in done.stderr
        side = tmp_path / "scored.jsonl.annotate-failed.jsonl"
        kept = [json.loads(line) for line in side.read_text(encoding="utf-8").splitlines()]
        assert len(kept) == spans - 100 and {r["target"] for r in kept} == {address.rsplit("/", 1)[0]}

        recorded.process.start()  # the same database, the same port
        replayed = _cli("annotate", str(side))
        assert replayed.returncode == 0, replayed.stderr
        assert f"{spans - 100} of {spans - 100} written" in replayed.stderr
        assert not side.exists()
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == spans and all(r["origin"] == "phoenix" for r in rows)
    assert sum(r["score"] is not None for r in rows) > spans // 2
    _check(_annotations(recorded, [r["span_id"] for r in rows]), rows)

    rows[0]["score"] = 0.123  # a re-run with a changed score updates the annotation, adds none
    changed = tmp_path / "changed.jsonl"
    changed.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["annotate", str(changed), "--to", recorded.server.address]) == 0
    _check(_annotations(recorded, [r["span_id"] for r in rows]), rows)


def test_a_key_read_for_one_server_is_not_sent_to_a_second(recorded: Recorded, tmp_path: Path) -> None:
    with StoreProxy(recorded.server.url) as source, StoreProxy(recorded.server.url) as other:
        address = f"phoenix://{source.url.removeprefix('http://')}/{PROJECT}"
        second = f"phoenix://{other.url.removeprefix('http://')}"
        args = ["score", address, "--limit", "4", "-o", str(tmp_path / "out.jsonl"), "--offline", "--quiet",
                "--cache-dir", str(tmp_path / "cache"), "--annotate", second]
        refused = _cli(*args, env={"PHOENIX_API_KEY": SECRET})
        assert refused.returncode == 2  # two Phoenix servers named: which one is the key for?
        assert "PHOENIX_API_KEY would go to 2 different servers" in refused.stderr
        assert source.seen == other.seen == [] and not (tmp_path / "out.jsonl").exists()

        done = _cli(*args, env={"PHOENIX_API_KEY": SECRET, "PHOENIX_ENDPOINT": source.url})
        assert done.returncode == 0, done.stderr
        assert "4 of 4 written" in done.stderr
    assert source.keys and set(source.keys) == {f"Bearer {SECRET}"}
    assert other.keys and set(other.keys) == {None}
    assert SECRET not in done.stderr


def _exported_spans(recorded: Recorded) -> dict[str, tuple[str, str]]:
    """Span id → (trace id, input value) as `arize-phoenix-client` exported them, read with pandas only."""
    frame = pd.read_parquet(recorded.exports["parquet"])
    return {str(s): (str(t), str(i)) for s, t, i in
            zip(frame["context.span_id"], frame["context.trace_id"], frame["attributes.input.value"], strict=True)}


def test_annotations_land_on_the_exported_ids_and_spans_phoenix_does_not_hold_are_dropped_and_resent(
        recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exported = _exported_spans(recorded)
    live = tlmscore.prepare(f"{recorded.address}?limit=6", _settings(tmp_path)).to_dict("records")
    held = [{"id": r["id"], "source": r["source"], "line": r["line"], "scorer": "ids", "score": 0.25 * (i % 4),
             "explanation": f"row {i}", "error": None, "trace_id": r["trace_id"], "span_id": r["span_id"]}
            for i, r in enumerate(live)]
    calls = [t.request["model"] for t in read_transcripts(f"{recorded.address}?limit=6")]  # a name per call
    for row, call in zip(held, calls, strict=True):  # the ids read live are the ids Phoenix exported for the call
        trace_id, request = exported[row["span_id"]]
        assert row["trace_id"] == trace_id
        assert json.loads(request)["model"] == call
    unheld = [{**held[0], "id": f"unheld-{i}", "span_id": f"{0xdead0000 + i:016x}"} for i in range(3)]
    batch = [held[0], unheld[0], *held[1:4], unheld[1], *held[4:], unheld[2]]  # one request of 9: 6 held, 3 not
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(json.dumps(r) + "\n" for r in batch), encoding="utf-8")
    with StoreProxy(recorded.server.url) as proxy:
        target = f"phoenix://{proxy.url.removeprefix('http://')}"
        assert main(["annotate", str(scored), "--to", target]) == 1
        posts = [path for method, path in proxy.seen if method == "POST"]
    assert len(posts) == 2  # refused whole for the unheld spans, then sent again without them
    assert "6 of 9 written" in capsys.readouterr().err
    side = [json.loads(line) for line in (tmp_path / "scored.jsonl.annotate-failed.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert [(r["id"], r["span_id"], r["target"]) for r in side] == [(r["id"], r["span_id"], target) for r in unheld]
    found = _annotations(recorded, [r["span_id"] for r in batch], name="tlmscore.ids")
    assert sorted(a["span_id"] for a in found) == sorted(r["span_id"] for r in held)  # exactly one per held span
    for annotation in found:
        row = next(r for r in held if r["span_id"] == annotation["span_id"])
        assert annotation["metadata"] == {"tlmscore.record.id": row["id"]}
        assert (annotation["result"]["score"], annotation["result"]["explanation"]) == (row["score"],
                                                                                        row["explanation"])
