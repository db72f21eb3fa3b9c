"""`tlmscore pull`: stored responses by id, through the openai SDK, against a local fake of the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

import tlmscore
from tests.servers.openai_server import OpenAIServer
from tests.support.paths import ROOT

# The openai SDK warns while serialising the xAI responses it parsed into the nearest types.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
SECRET = "sk-pull-test-5d1e0b77"  # noqa: S105  (a made-up key the outputs are searched for)


def _stored(responses: Path) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every recorded Responses object under an id of its own, with input items (five for the first)."""
    stored: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for path in sorted(responses.glob("*.json")):
        response = json.loads(path.read_text(encoding="utf-8"))
        if response.get("object") != "response":
            continue
        rid = f"resp_{path.stem.replace('.', '_').replace('-', '_')}"
        turns = 5 if not stored else 1
        items = [{"id": f"msg_{rid}_{n}", "type": "message", "role": "user", "status": "completed",
                  "content": [{"type": "input_text", "text": f"Question {n} about {path.stem}?"}]}
                 for n in range(turns)]
        stored[rid] = ({**response, "id": rid}, items)
    return stored


def _pull(server: OpenAIServer, ids: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": SECRET}
    return subprocess.run([sys.executable, "-m", "tlmscore", "pull", str(ids), "-o", str(out), "--base-url",
                           server.url, "--concurrency", "4", *extra],
                          capture_output=True, text=True, env=env, check=False, timeout=300)


def test_pulled_responses_read_as_the_sdk_returns_them(recorded_responses: Path, tmp_path: Path) -> None:
    stored = _stored(recorded_responses)
    first = next(iter(stored))
    throttled = list(stored)[3]
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join([*stored, "resp_never_stored"]) + "\n", encoding="utf-8")
    out = tmp_path / "records.jsonl"
    with OpenAIServer(recorded_responses, stored=stored, throttle={throttled}) as server:
        done = _pull(server, ids, out)
        assert done.returncode == 0, done.stderr
        client = openai.OpenAI(base_url=server.url, api_key="sk-other", max_retries=0)
        returned = {rid: client.responses.retrieve(rid) for rid in stored}
        requests = list(server.requests)
        again = _pull(server, ids, out, "--resume")
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == len(requests)  # every id was done: the resumed pull asked nothing
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == [*stored, "resp_never_stored"]
    assert [i["id"] for i in records[0]["request"]["input"]] == [i["id"] for i in stored[first][1]]
    item_pages = [path for method, path, _ in requests if f"/responses/{first}/input_items" in path]
    assert len(item_pages) == 3  # five items, two a page
    retrieves = [path for method, path, _ in requests if path.startswith(f"/v1/responses/{throttled}?")]
    assert len(retrieves) == 2 and "include" in retrieves[0]  # a 429, then the retry after Retry-After
    assert "expired or was never stored" in records[-1]["error"]["message"]

    settings = tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache")
    rows = tlmscore.prepare(out, settings)
    raw = tlmscore.prepare([{"request": records[i]["request"], "response": returned[rid]}
                            for i, rid in enumerate(stored)], settings)
    assert list(rows["prompt"][:-1]) == list(raw["prompt"])
    assert list(rows["response"][:-1]) == list(raw["response"])
    assert set(rows["origin"]) == {"openai"}
    assert "expired or was never stored" in rows["error"].iloc[-1]
    written = [out.read_text(encoding="utf-8"), done.stdout, done.stderr, again.stderr]
    assert all(SECRET not in text for text in written)
    assert "Warning" not in done.stderr
    assert done.stderr.strip().endswith("1 could not be pulled (error records)")


def test_a_pull_that_pulls_nothing_exits_1_with_one_line(recorded_responses: Path, tmp_path: Path) -> None:
    stored = _stored(recorded_responses)
    ids = tmp_path / "ids.txt"
    ids.write_text("resp_never_stored\nresp_expired\n", encoding="utf-8")
    out = tmp_path / "records.jsonl"
    with OpenAIServer(recorded_responses, stored=stored) as server:
        done = _pull(server, ids, out)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"tlmscore: error: none of the 2 ids could be pulled (the error records in {out} say why)"]
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ["resp_never_stored", "resp_expired"]  # the records say why, each
    assert all("could not be pulled" in r["error"]["message"] for r in records)


def test_ids_from_a_table_column(recorded_responses: Path, tmp_path: Path) -> None:
    stored = _stored(recorded_responses)
    wanted = list(stored)[:2]
    table = tmp_path / "spans.csv"
    table.write_text("span,response_id\n" + "".join(f"s{n},{rid}\n" for n, rid in enumerate(wanted)),
                     encoding="utf-8")
    out = tmp_path / "records.jsonl"
    with OpenAIServer(recorded_responses, stored=stored) as server:
        done = _pull(server, table, out)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == wanted


def test_pull_without_a_key_is_a_usage_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tlmscore", "pull", "resp_1", "-o", str(tmp_path / "o.jsonl")],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stderr
