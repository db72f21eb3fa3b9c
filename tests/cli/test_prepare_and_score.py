"""The `tlmscore` command: rows for every record, output formats, exit codes, summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import diskcache
import pandas as pd
import pytest

from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tests.support.paths import FIXTURES
from tlmscore.cli import main

ROWS_IN_DEMO = 17
ERRORS_IN_DEMO = 3


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_prepare_writes_one_row_per_record_in_order(tmp_path: Path, demo_path: Path, suffix: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"out{suffix}"
    code, err = run(["prepare", str(demo_path), "-o", str(out), "--offline", "--cache-dir", str(tmp_path / "c"),
                     "--pages", str(demo_path.parent / "pages")], capsys)
    assert code == 0
    if suffix == ".parquet":
        df = pd.read_parquet(out)
    elif suffix == ".csv":
        df = pd.read_csv(out)
    else:
        df = pd.read_json(out, lines=True)
    assert len(df) == ROWS_IN_DEMO
    assert list(df.line) == sorted(df.line)
    assert df.error.notna().sum() == ERRORS_IN_DEMO
    assert df.prompt.isna().sum() == ERRORS_IN_DEMO
    assert list(df.columns[:13]) == ["id", "source", "line", "model", "response_id", "prompt", "response",
                                     "n_tool_calls", "n_urls", "n_urls_ok", "n_urls_failed", "warnings", "error"]
    assert f"{ROWS_IN_DEMO} records" in err and f"{ERRORS_IN_DEMO} errors" in err
    assert "demo.jsonl:9: invalid JSON" in err


def test_offline_without_pages_marks_urls_unavailable(tmp_path: Path, demo_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    code, _ = run(["prepare", str(demo_path), "-o", str(out), "--offline", "--cache-dir", str(tmp_path / "c")],
                  capsys)
    assert code == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    web = [r for r in rows if r["n_urls"]]
    assert web and all(r["n_urls_ok"] == 0 and r["n_urls_failed"] == r["n_urls"] for r in web)
    assert all("offline_miss" in r["prompt"] for r in web)


def test_usage_errors_exit_2(tmp_path: Path, demo_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["prepare", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o.parquet")], capsys)
    assert code == 2 and "missing.jsonl: no such file" in err
    code, err = run(["prepare", str(demo_path), "-o", str(tmp_path / "o.xlsx")], capsys)
    assert code == 2 and "must end in one of .jsonl, .csv, .parquet" in err
    code, err = run(["prepare", str(demo_path), "-o", str(tmp_path / "o.csv"), "--concurrency", "0"], capsys)
    assert code == 2 and "concurrency" in err
    with pytest.raises(SystemExit) as exc:
        main(["prepare", str(demo_path)])
    assert exc.value.code == 2


def test_settings_reach_the_pipeline(tmp_path: Path, demo_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cited, every = tmp_path / "cited.jsonl", tmp_path / "all.jsonl"
    base = [str(demo_path), "--offline", "--cache-dir", str(tmp_path / "c")]
    assert run(["prepare", *base, "-o", str(cited)], capsys)[0] == 0
    assert run(["prepare", *base, "-o", str(every), "--urls", "all", "--reasoning", "summary"], capsys)[0] == 0
    a = {r["id"]: r for r in map(json.loads, cited.read_text(encoding="utf-8").splitlines())}
    b = {r["id"]: r for r in map(json.loads, every.read_text(encoding="utf-8").splitlines())}
    assert b["web-search-jwst-sources"]["n_urls"] > a["web-search-jwst-sources"]["n_urls"]
    assert "(reasoning summary)" in b["reasoning-summary-train"]["prompt"]
    assert "(reasoning summary)" not in a["reasoning-summary-train"]["prompt"]


def test_console_script_runs_as_a_module(tmp_path: Path, demo_path: Path) -> None:
    out = tmp_path / "o.parquet"
    proc = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", str(demo_path), "-o", str(out),
                           "--offline", "--cache-dir", str(tmp_path / "c")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert len(pd.read_parquet(out)) == ROWS_IN_DEMO
    assert "\r" not in proc.stderr  # no progress bars when stderr is not a terminal


def test_the_executable_exits_with_the_command_status(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", str(tmp_path / "missing.jsonl"),
                           "-o", str(tmp_path / "o.parquet")], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert "missing.jsonl" in proc.stderr
    assert not (tmp_path / "o.parquet").exists()


EXECUTABLE_STATE = (
    "import atexit, os, sys\n"
    "atexit.register(lambda: print('httpx' in sys.modules, 'click' in sys.modules,"
    " os.environ.get('OPENBLAS_NUM_THREADS')))\n"
    "from tlmscore.__main__ import start\n"
    "start()\n"
)


def executable_state(tmp_path: Path, **env: str) -> str:
    """Run the executable's `cache stats`; return what it had loaded and set when it exited."""
    environment = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | env
    proc = subprocess.run([sys.executable, "-c", EXECUTABLE_STATE, "cache", "stats", "--cache-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False, env=environment)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()[-1]


def test_the_executable_starts_without_numpy(tmp_path: Path) -> None:
    """Only `compare` (its bootstrap interval) and scoring need numpy; a `prepare` or `cache` start-up does not."""
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print('numpy' in sys.modules))\n"
              "from tlmscore.__main__ import start\n"
              "start()\n")
    proc = subprocess.run([sys.executable, "-c", script, "cache", "stats", "--cache-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "False"


def test_a_run_on_files_does_not_load_phoenix(tmp_path: Path) -> None:
    """`phoenix.client` loads the whole Phoenix server package when that is installed (seconds of CPU):
    only a `phoenix://` input or target loads it."""
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print(sorted(m for m in sys.modules if m.split('.')[0] == 'phoenix')))\n"
              "from tlmscore.__main__ import start\n"
              "start()\n")
    out = tmp_path / "rows.jsonl"
    proc = subprocess.run([sys.executable, "-c", script, "score", str(FIXTURES / "demo.jsonl"), "-o", str(out),
                           "--offline", "--pages", str(FIXTURES / "pages"), "--quiet", "--annotate",
                           f"otlp-json:{tmp_path / 'events.json'}"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and (tmp_path / "events.json").is_file()
    assert proc.stdout.splitlines()[-1] == "[]"


def test_the_executable_does_not_load_the_command_line_of_httpx(tmp_path: Path) -> None:
    """httpx brings its own command line (click and more) along on import; tlmscore never runs it."""
    assert executable_state(tmp_path).startswith("True False")


def test_the_executable_keeps_numpy_to_one_blas_thread_unless_told_otherwise(tmp_path: Path) -> None:
    assert executable_state(tmp_path).endswith(" 1")
    assert executable_state(tmp_path, OPENBLAS_NUM_THREADS="3").endswith(" 3")


def test_a_cache_that_cannot_be_written_is_one_plain_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(*args: object, **kwargs: object) -> None:
        raise diskcache.core.sqlite3.OperationalError("database or disk is full")

    with EvidenceServer() as server:
        url = server.route("/a", Reply(body=html_page("Ferry", "The ferry runs every twenty minutes.")))
        record = {"id": "r1", "request": {"input": "How often does the ferry run?"}, "response": {
            "id": "resp_1", "object": "response", "model": "gpt-4.1", "output": [
                {"type": "web_search_call", "id": "ws_1", "status": "completed",
                 "action": {"type": "search", "query": "ferry", "sources": [{"type": "url", "url": url}]}},
                {"type": "message", "id": "m1", "role": "assistant", "status": "completed", "content": [
                    {"type": "output_text", "text": "Every twenty minutes.", "annotations": [
                        {"type": "url_citation", "url": url, "title": "Ferry", "start_index": 0, "end_index": 5}]}]}]}}
        log = tmp_path / "log.jsonl"
        log.write_text(json.dumps(record) + "\n", encoding="utf-8")
        monkeypatch.setattr(diskcache.Cache, "set", full_disk)
        code, err = run(["prepare", str(log), "-o", str(tmp_path / "out.jsonl"), "--cache-dir", str(tmp_path / "c"),
                         "--allow-host", "127.0.0.1", "--quiet"], capsys)
    assert code == 0
    assert "tlmscore: warning: 1 fetched page could not be saved in the cache" in err
    assert "disk is full" in err and "RuntimeWarning" not in err
    (row,) = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert row["n_urls_ok"] == 1 and "twenty minutes" in row["prompt"]
