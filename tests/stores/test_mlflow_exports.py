"""MLflow traces as users export them, and media MLflow keeps as attachments.

`fixtures/traces/mlflow/` was made by `python -m tests.servers.mlflow_exports`: the project's 91 replayable
calls (plain and streamed) through the official `openai` client under the real `mlflow.openai.autolog()`,
sent to a real `mlflow server`, then exported with `Trace.to_json()` (one a line) and as the
`mlflow.search_traces()` DataFrame saved to Parquet. Both exports must give the same rows, and the rows
of the raw records but for the causes `docs/traces.md` lists. The live test records the same calls again
into a server of its own and reads the experiment live and both its exports: the same rows, and a live
read renders attachments as the raw records render their media.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tlmscore
from tests.support.paths import ROOT
from tlmscore.cli import main
from tlmscore.stores import find_reader

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FOLDER = ROOT / "fixtures" / "traces" / "mlflow"
EXPORTS = ("traces.jsonl", "traces.parquet")
COLUMNS = ["id", "trace_id", "span_id", "origin", "model", "prompt", "response", "response_status", "error"]
ATTACHED = 8
"""Calls whose media MLflow kept as attachments (an inline PNG or PDF in the request or a tool's output)."""
REFERENCES = 1
"""Calls whose input refers to an earlier call's item by id: a file's other records hold it, a live read (not
read twice) does not."""


def _settings(tmp_path: Path) -> tlmscore.Settings:
    return tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache")


def _calls(folder: Path = FOLDER) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "calls.jsonl").read_text(encoding="utf-8").splitlines()]


def _kept(warnings: Any) -> bool:
    return any("MLflow keeps" in str(w) for w in warnings or [])


@pytest.fixture(autouse=True)
def no_tracking_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exports read with no server named (MLFLOW_TRACKING_URI unset) unless a test names one."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return tlmscore.prepare(_calls(), _settings(tmp_path_factory.mktemp("raw")))


@pytest.mark.parametrize("name", EXPORTS)
def test_an_export_is_read_by_its_reader_one_row_per_llm_span(name: str, tmp_path: Path) -> None:
    reader = find_reader(str(FOLDER / name))
    assert reader is not None and reader.name == "mlflow-export"
    rows = tlmscore.prepare(str(FOLDER / name), _settings(tmp_path))
    assert len(rows) == len(_calls()) and rows["error"].isna().all()
    assert set(rows["origin"]) == {"mlflow"}
    assert rows["trace_id"].str.fullmatch(r"tr-[0-9a-f]{32}").all() and rows["trace_id"].is_unique
    assert rows["span_id"].str.fullmatch(r"[0-9a-f]{16}").all()


def test_both_exports_and_the_table_saved_as_csv_or_json_lines_give_the_same_rows(tmp_path: Path) -> None:
    lines, table = (tlmscore.prepare(str(FOLDER / name), _settings(tmp_path)) for name in EXPORTS)
    assert lines[[*COLUMNS, "warnings"]].equals(table[[*COLUMNS, "warnings"]])
    frame = pd.read_parquet(FOLDER / "traces.parquet")
    frame.to_csv(tmp_path / "traces.csv", index=False)
    frame[["trace_id", "trace", "state"]].to_json(tmp_path / "traces.ndjson", orient="records", lines=True)
    for saved in ("traces.csv", "traces.ndjson"):
        rows = tlmscore.prepare(str(tmp_path / saved), _settings(tmp_path))
        assert rows[[*COLUMNS, "warnings"]].equals(lines[[*COLUMNS, "warnings"]]), saved


def test_export_rows_equal_the_raw_records_but_for_attachments(raw: pd.DataFrame, tmp_path: Path) -> None:
    rows = tlmscore.prepare(str(FOLDER / "traces.jsonl"), _settings(tmp_path))
    same = (rows["prompt"] == raw["prompt"]) & (rows["response"] == raw["response"])
    kept = rows["warnings"].map(_kept)
    assert list(rows["model"]) == list(raw["model"])
    assert kept.sum() == ATTACHED and not same[kept].any()
    assert same.sum() == len(rows) - ATTACHED  # the SDK's parse of built-in items included (key order, nulls)


def test_attachments_in_an_export_are_named_as_kept_in_mlflow_with_their_real_size(
        raw: pd.DataFrame, tmp_path: Path) -> None:
    rows = tlmscore.prepare(str(FOLDER / "traces.parquet"), _settings(tmp_path))
    kept = rows[rows["warnings"].map(_kept)]
    for index, prompt in kept["prompt"].items():
        found = re.findall(r"([a-z]+/[a-z.+-]+), ([\d,]+) bytes, kept in MLflow \(mlflow-attachment://[0-9a-f-]+\)",
                           prompt)
        assert found, prompt
        for media, size in found:  # the raw record's media type and size; no size or hash of the URI's own text
            assert f"{media}, {size} bytes, sha256:" in raw["prompt"][index]
        assert "?content_type=" not in prompt


def test_a_streamed_chat_calls_tool_calls_are_rebuilt_from_its_chunks(raw: pd.DataFrame, tmp_path: Path) -> None:
    rows = tlmscore.prepare(str(FOLDER / "traces.jsonl"), _settings(tmp_path))
    streamed = [i for i, c in enumerate(_calls()) if c["request"].get("stream") and "messages" in c["request"]
                and c["response"]["choices"][0]["message"].get("tool_calls")]
    assert streamed
    for index in streamed:
        assert "<tool_call>" in rows["response"][index]
        assert rows["response"][index] == raw["response"][index]


def test_a_table_of_traces_with_a_damaged_row_gives_an_error_row_for_it(tmp_path: Path) -> None:
    lines = (FOLDER / "traces.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    damaged = tmp_path / "traces.jsonl"
    broken = json.loads(lines[1]) | {"data": {"spans": "not a list"}}
    damaged.write_text("\n".join([lines[0], json.dumps(broken), lines[2]]) + "\n", encoding="utf-8")
    rows = tlmscore.prepare(str(damaged), _settings(tmp_path))
    assert len(rows) == 3
    assert rows["error"].isna().tolist() == [True, False, True]
    assert "traces.jsonl:2" in rows["error"][1] and "not an MLflow trace" in rows["error"][1]


# The live read: the same calls recorded into a server of this module's own.

pytest.importorskip("mlflow.server", reason="the MLflow server is not installed: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    from tests.servers.mlflow_exports import EXPERIMENT, record_into

    out = tmp_path_factory.mktemp("exports")
    server = record_into(tmp_path_factory.mktemp("mlflow"), out)
    try:
        yield f"{server.address}/{EXPERIMENT}", out
    finally:
        server.stop()


def test_live_and_both_exports_give_the_same_rows_and_live_renders_attachments_as_raw(
        live: tuple[str, Path], raw: pd.DataFrame, tmp_path: Path) -> None:
    address, out = live
    rows = tlmscore.prepare(address, _settings(tmp_path))
    assert len(rows) == len(_calls()) and rows["error"].isna().all()
    referring = pd.Series(["item_reference" in json.dumps(c["request"]) for c in _calls()])
    assert referring.sum() == REFERENCES
    for name in EXPORTS:
        exported = tlmscore.prepare(str(out / name), _settings(tmp_path))
        kept = exported["warnings"].map(_kept)
        assert kept.sum() == ATTACHED
        assert list(rows["span_id"]) == list(exported["span_id"])
        for column in COLUMNS:
            assert list(rows[~kept & ~referring][column]) == list(exported[~kept & ~referring][column]), column
    same = (rows["prompt"] == raw["prompt"]) & (rows["response"] == raw["response"])
    assert same.sum() == len(rows) - REFERENCES  # every attachment rendered as the raw record's media
    assert not any("mlflow-attachment" in p for p in rows["prompt"])


def test_an_export_read_beside_the_server_that_keeps_its_traces_renders_attachments_as_live_and_raw(
        live: tuple[str, Path], raw: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address, out = live
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://" + address.removeprefix("mlflow://").rsplit("/", 1)[0])
    rows = tlmscore.prepare(address, _settings(tmp_path))
    referring = pd.Series(["item_reference" in json.dumps(c["request"]) for c in _calls()])
    for name in EXPORTS:
        exported = tlmscore.prepare(str(out / name), _settings(tmp_path))
        warned = [w for ws in exported["warnings"] for w in ws if "MLflow" in w]
        assert not warned, warned  # no attachment kept apart, none that failed
        for column in COLUMNS:
            assert list(rows[~referring][column]) == list(exported[~referring][column]), column
        same = (exported["prompt"] == raw["prompt"]) & (exported["response"] == raw["response"])
        assert same.all(), list(exported["id"][~same])  # every call, its media and its item_reference included


def test_an_attachment_that_cannot_be_fetched_is_named_in_the_rows_warnings(
        live: tuple[str, Path], tmp_path: Path) -> None:
    from tests.servers.store_proxy import StoreProxy

    address, _ = live
    host = address.removeprefix("mlflow://").split("/", 1)[0]

    def refuse(method: str, path: str) -> int | None:
        return 404 if "get-trace-artifact" in path else None

    with StoreProxy(f"http://{host}", before=refuse) as proxy:
        out = tmp_path / "rows.jsonl"
        proxied = f"mlflow://{proxy.url.removeprefix('http://')}/{address.rsplit('/', 1)[1]}"
        assert main(["prepare", proxied, "-o", str(out), "--offline", "--cache-dir", str(tmp_path / "c")]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    named = [r for r in rows if any("MLflow attachment not fetched" in w for w in r.get("warnings") or [])]
    assert len(named) == ATTACHED
    assert all("HTTP 404" in " ".join(r["warnings"]) for r in named)


def test_a_server_named_for_an_export_that_never_answers_is_given_up_after_three_attachments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row still comes, each attachment named; after three requests with no answer the rest are not sent."""
    import socket

    with socket.socket() as closed:  # a port nothing listens on: each request is refused at once
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    rows = tlmscore.prepare(str(FOLDER / "traces.jsonl"), _settings(tmp_path))
    warned = [w for ws in rows["warnings"] for w in ws if w.startswith("MLflow attachment not fetched")]
    assert len(rows) == len(_calls()) and rows["error"].isna().all()
    assert len(warned) >= ATTACHED and sum("Connection refused" in w and "gave up" not in w for w in warned) == 3
    assert all("gave up after 3 failed requests in a row" in w for w in warned[3:])
