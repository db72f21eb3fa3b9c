"""Scores written back to a real Phoenix server (`phoenix serve`) as span annotations, through
`arize-phoenix-client`, and read back through the same client.

The spans are LLM spans Phoenix ingested on its own OTLP endpoint; the scored rows carry their
trace and span ids, as rows read from a trace store do.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from phoenix.client import Client

from tests.phoenix_server import PROJECT, PhoenixServer, send_llm_spans, serve_phoenix
from tlmscore.cli import main

LABELLED = Path(__file__).resolve().parent.parent / "fixtures" / "labelled"
ROWS = 8


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    yield from serve_phoenix(tmp_path_factory.mktemp("phoenix"))


def _ids(index: int) -> tuple[str, str]:
    return f"{0xa0 + index:032x}", f"{0xb0 + index:016x}"


@pytest.fixture(scope="module")
def scored(phoenix: PhoenixServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight labelled records scored offline, each tied to a span in Phoenix; one row is an error row."""
    folder = tmp_path_factory.mktemp("scored")
    out = folder / "plain.jsonl"
    assert main(["score", str(LABELLED / "labelled.jsonl"), "-o", str(out), "--offline", "--quiet",
                 "--pages", str(LABELLED / "pages"), "--cache-dir", str(folder / "cache")]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()][:ROWS]
    for index, row in enumerate(rows):
        trace, span = _ids(index)
        row |= {"origin": "phoenix", "trace_id": trace, "span_id": span}
    rows[2] |= {"score": None, "error": "response failed: server_error"}
    send_llm_spans(phoenix, [(*_ids(i), f"llm-{i}") for i in range(ROWS)])
    deadline = time.monotonic() + 120
    while _ingested(phoenix) < ROWS:
        assert time.monotonic() < deadline, "Phoenix did not ingest the spans"
        time.sleep(0.5)
    traced = folder / "scored.jsonl"
    traced.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return traced


def _ingested(phoenix: PhoenixServer) -> int:
    """Spans in the project so far (ingestion is asynchronous; the project exists once its first span is in)."""
    try:
        return len(Client(base_url=phoenix.url).spans.get_spans(project_identifier=PROJECT))
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code == 404:
            return 0
        raise


def _annotations(phoenix: PhoenixServer) -> list[Any]:
    client = Client(base_url=phoenix.url)
    return list(client.spans.get_span_annotations(span_ids=[_ids(i)[1] for i in range(ROWS)],
                                                  project_identifier=PROJECT))


def test_annotations_equal_the_rows_and_a_rerun_updates_them(phoenix: PhoenixServer, scored: Path) -> None:
    target = "phoenix://" + phoenix.url.removeprefix("http://")
    assert main(["annotate", str(scored), "--to", target]) == 0
    assert main(["annotate", str(scored), "--to", target]) == 0  # the same annotations, not new ones
    found = {a["span_id"]: a for a in _annotations(phoenix)}
    rows = [json.loads(line) for line in scored.read_text(encoding="utf-8").splitlines()]
    assert len(found) == len(rows) == ROWS
    assert len(_annotations(phoenix)) == ROWS
    for row in rows:
        annotation = found[row["span_id"]]
        assert annotation["name"] == "tlmscore.grounding"
        assert annotation["annotator_kind"] == "CODE"
        assert annotation["metadata"] == {"tlmscore.record.id": row["id"]}
        result = annotation["result"]
        if row["error"]:
            assert (result["label"], result["explanation"], result.get("score")) == (
                "not scorable", row["error"], None)
        else:
            assert result["score"] == pytest.approx(row["score"])
            assert result["label"] == ("supported" if row["score"] >= 0.5 else "unsupported")
            assert result["explanation"] == row["explanation"]


def test_an_unreachable_server_loses_no_score_and_the_side_file_replays(phoenix: PhoenixServer, scored: Path,
                                                                        tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        down = f"phoenix://127.0.0.1:{probe.getsockname()[1]}"
    copy = tmp_path / "scored.jsonl"
    rows = [json.loads(line) for line in scored.read_text(encoding="utf-8").splitlines()]
    rows[0]["score"] = 0.123  # a changed score, so the replay is seen to update
    copy.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["annotate", str(copy), "--to", down]) == 1
    side = tmp_path / "scored.jsonl.annotate-failed.jsonl"
    assert [json.loads(line)["id"] for line in side.read_text(encoding="utf-8").splitlines()] == [
        r["id"] for r in rows]
    assert main(["annotate", str(side), "--to", "phoenix://" + phoenix.url.removeprefix("http://")]) == 0
    assert not side.exists()
    found = {a["span_id"]: a for a in _annotations(phoenix)}
    assert len(found) == ROWS
    assert found[rows[0]["span_id"]]["result"]["score"] == pytest.approx(0.123)
