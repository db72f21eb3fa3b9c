"""`tlmscore cache stats` and `tlmscore cache clear`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tlmscore.cli import main


def test_cache_stats_and_clear_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    with EvidenceServer() as server:
        good = server.route("/good", Reply(body=html_page("Ferry", "The ferry runs every twenty minutes.")))
        gone = server.route("/gone", Reply(status=404, body=b"not here"))
        record = {"id": "r1", "request": {"input": "How often does the ferry run?"}, "response": {
            "id": "resp_1", "object": "response", "model": "gpt-4.1", "output": [
                {"type": "web_search_call", "id": "ws_1", "status": "completed",
                 "action": {"type": "search", "query": "ferry",
                            "sources": [{"type": "url", "url": good}, {"type": "url", "url": gone}]}},
                {"type": "message", "id": "m1", "role": "assistant", "status": "completed", "content": [
                    {"type": "output_text", "text": "Every twenty minutes.", "annotations": []}]}]}}
        log = tmp_path / "log.jsonl"
        log.write_text(json.dumps(record) + "\n", encoding="utf-8")
        assert main(["prepare", str(log), "-o", str(tmp_path / "out.jsonl"), "--cache-dir", str(cache),
                     "--allow-host", "127.0.0.1", "--quiet"]) == 0
    capsys.readouterr()

    def stats() -> dict[str, str]:
        assert main(["cache", "stats", "--cache-dir", str(cache)]) == 0
        return dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())

    before = stats()
    assert (before["directory"], before["entries"], before["ok"], before["failed"]) == (str(cache), "2", "1", "1")
    assert int(before["size_bytes"]) > 0
    assert main(["cache", "clear", "--cache-dir", str(cache)]) == 0
    assert f"removed 2 cached pages from {cache}" in capsys.readouterr().err
    after = stats()
    assert (after["entries"], after["ok"], after["failed"]) == ("0", "0", "0")
