"""The `tlmscore` command: rows for every record, output formats, exit codes, summary."""

from __future__ import annotations

import json
import statistics
import tracemalloc
from pathlib import Path

import diskcache
import pandas as pd
import pytest

from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tlmscore.cli import main
from tlmscore.cli._summary import Summary

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


EXIT_NO_ROWS = 1


def test_an_empty_input_is_a_warning(tmp_path: Path, demo_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    out = tmp_path / "o.jsonl"
    code, err = run(["prepare", str(empty), "-o", str(out), "--offline", "--cache-dir", str(tmp_path / "c")], capsys)
    assert code == 0
    assert f"tlmscore: warning: {empty}: no records in this input" in err
    assert out.read_bytes() == b""
    code, err = run(["prepare", str(demo_path), str(empty), "-o", str(out), "--offline",
                     "--cache-dir", str(tmp_path / "c")], capsys)
    assert code == 0
    assert err.count("no records in this input") == 1


def test_an_empty_input_gives_every_format_the_same_columns(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A CSV header and a Parquet schema (typed as rows are) name the same columns; JSON lines have no header."""
    import pandas as pd
    import pyarrow.parquet as pq

    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    outs = {suffix: tmp_path / f"o{suffix}" for suffix in (".jsonl", ".csv", ".parquet")}
    for out in outs.values():
        code, _ = run(["score", str(empty), "-o", str(out), "--offline", "--cache-dir", str(tmp_path / "c")], capsys)
        assert code == 0
    columns = list(pd.read_csv(outs[".csv"]).columns)
    schema = pq.read_schema(outs[".parquet"])
    assert columns == schema.names and {"prompt", "score", "error", "span_id"} <= set(columns)
    assert str(schema.field("score").type) == "double" and str(schema.field("line").type) == "int64"
    assert pq.read_table(outs[".parquet"]).num_rows == 0 and outs[".jsonl"].read_bytes() == b""


def test_a_run_without_one_usable_row_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "broken.jsonl"
    log.write_text("[1]\n{not json\n", encoding="utf-8")
    out = tmp_path / "o.jsonl"
    code, err = run(["prepare", str(log), "-o", str(out), "--offline", "--cache-dir", str(tmp_path / "c")], capsys)
    assert code == EXIT_NO_ROWS
    assert ("tlmscore: error: no record produced a usable row: all 2 rows have an error "
            f"(the 'error' column of {out} says why)") in err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in rows] == [1, 2] and all(r["error"] for r in rows)


def test_offline_writes_no_default_cache(tmp_path: Path, demo_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "default-cache"
    monkeypatch.setenv("TLMSCORE_CACHE_DIR", str(cache))
    code, _ = run(["prepare", str(demo_path), "-o", str(tmp_path / "o.jsonl"), "--offline",
                   "--pages", str(demo_path.parent / "pages")], capsys)
    assert code == 0
    assert not cache.exists()


def test_summary_keeps_eight_bytes_a_score_however_many_rows_pass() -> None:
    """Rows are freed chunk by chunk; the summary keeps each score as a double, not as a float object."""
    summary = Summary()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for chunk in range(50):
            summary.add([{"id": f"{chunk}-{i}", "score": (chunk * 1000 + i) / 50_000} for i in range(1000)])
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(summary.scores) == 50_000
    assert kept / 50_000 < 12  # a list of floats keeps 32 bytes a row


def test_summary_quartiles_lie_within_the_scores() -> None:
    summary = Summary()
    scores = [0.73, 1.0, 0.2, 0.65]
    summary.add([{"id": str(i), "score": s} for i, s in enumerate(scores)])
    line = next(x for x in summary.text(Path("o.jsonl"), scored=True).splitlines() if "score min" in x)
    values = [float(v) for v in line.split()[2::2]]
    assert values == sorted(values) and values[0] == min(scores) and values[-1] == max(scores)
    assert values[1] == round(statistics.quantiles(scores, n=4, method="inclusive")[0], 3)
