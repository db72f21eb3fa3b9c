"""A scorer whose server is down or silent: one line and exit 2 before any work; a server that fails
request after request is given up, and the rows say why; the summary counts what was prepared."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.servers.judge_server import ChatReply, ChatServer
from tlmscore.cli import main

LOG_LINES = 6


def write_log(path: Path, n: int = LOG_LINES) -> Path:
    lines = [json.dumps({"id": f"r{i}", "request": {"messages": [{"role": "user", "content": f"{i} + {i}?"}]},
                         "response": {"id": f"c{i}", "object": "chat.completion", "model": "m", "choices": [
                             {"index": 0, "message": {"role": "assistant", "content": str(2 * i)},
                              "finish_reason": "stop"}]}}) for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield port


@contextmanager
def silent_server() -> Iterator[int]:
    """A loopback port that takes connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


def judge_run(tmp_path: Path, base_url: str, *more: str) -> list[str]:
    log = write_log(tmp_path / "log.jsonl")
    return ["score", str(log), "-o", str(tmp_path / "out.jsonl"), "--offline", "--quiet", "--cache-dir",
            str(tmp_path / "c"), "--scorer", "judge", "--model", "m", "--base-url", base_url, *more]


def assert_refused_before_work(code: int, err: str, tmp_path: Path, url: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tlmscore: error: ") and url in lines[0], err
    assert "cannot be reached" in lines[0] and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl"]  # no output, no manifest, no checkpoint


def test_a_judge_url_nothing_listens_on_is_one_line_and_exit_2(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    with closed_port() as port:
        url = f"http://127.0.0.1:{port}/v1"
        code = main(judge_run(tmp_path, url))
    err = capsys.readouterr().err
    assert_refused_before_work(code, err, tmp_path, url)
    assert "Connect" in err


def test_a_judge_server_that_never_answers_is_given_up_within_its_timeout(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with silent_server() as port:
        url = f"http://127.0.0.1:{port}/v1"
        start = time.monotonic()
        code = main(judge_run(tmp_path, url, "--option", "timeout=1"))
        took = time.monotonic() - start
    err = capsys.readouterr().err
    assert_refused_before_work(code, err, tmp_path, url)
    assert "no answer within 1 s" in err and took < 8


def test_tlm_with_a_key_and_no_network_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("cleanlab_tlm", reason="the tlm extra (cleanlab-tlm) is not installed")
    monkeypatch.setenv("CLEANLAB_API_KEY", "tlm-test-key-7")
    log = write_log(tmp_path / "log.jsonl")
    with silent_server() as port:
        url = f"http://127.0.0.1:{port}/api"
        monkeypatch.setenv("CLEANLAB_API_BASE_URL", url)
        code = main(["score", str(log), "-o", str(tmp_path / "out.jsonl"), "--offline", "--quiet", "--cache-dir",
                     str(tmp_path / "c"), "--scorer", "tlm", "--option", "timeout=1"])
    err = capsys.readouterr().err
    assert_refused_before_work(code, err, tmp_path, url)
    assert "tlm scorer" in err and "tlm-test-key-7" not in err


def test_a_failing_judge_is_given_up_after_three_requests_and_the_rows_say_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ChatServer(lambda body, n: ChatReply(503, {"error": "overloaded"})) as server:
        code = main(judge_run(tmp_path, server.url, "--option", "retries=0", "--option", "concurrency=1",
                              "--no-judge-cache"))
    err = capsys.readouterr().err
    assert code == 1  # every row has an error
    assert server.calls == 3  # three failed requests in a row, then none: not two reflections for each of 6 rows
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == LOG_LINES and all(r["score"] is None for r in rows)
    given_up = [r for r in rows if "not asked: gave up after 3 failed requests in a row (last: HTTP 503)" in r["error"]]
    assert len(given_up) >= LOG_LINES - 2  # the rows whose requests were the three that failed say HTTP 503
    assert all("HTTP 503" in r["error"] for r in rows)
    # every record was rendered: the summary says so, and that the errors are the scorer's
    assert f"{LOG_LINES} records → " in err and f": {LOG_LINES} prepared, {LOG_LINES} errors " \
        f"({LOG_LINES} of them in scoring)" in err
