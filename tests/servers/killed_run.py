"""A run worth killing: a log of many records citing report pages held back until the test lets them go.

`write_log` writes `records` records, each citing the report page of its chunk; `report_server`
serves those pages on a real local server, the first `open_blocks` at once and the rest once the
test sets the gate (set at the end in any case), so a run cannot finish before the test has seen
what it waits for, however fast the machine. `kill_when_saved` kills the run with SIGKILL as soon
as enough rows are saved.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.servers.evidence_server import EvidenceServer, Reply, html_page


def record(i: int, url: str) -> str:
    """Record `i`: a web search whose answer cites `url` for the whole of its one sentence."""
    text = f"Station {i} reported {i % 7 + 10} degrees at noon."
    return json.dumps({
        "id": f"rec-{i:05d}",
        "request": {"input": f"What did station {i} report?", "tools": [{"type": "web_search"}]},
        "response": {"id": f"resp_{i}", "object": "response", "model": "gpt-4.1", "output": [
            {"type": "web_search_call", "id": f"ws_{i}", "status": "completed",
             "action": {"type": "search", "query": f"station {i}", "sources": [{"type": "url", "url": url}]}},
            {"type": "message", "id": f"msg_{i}", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": text, "annotations": [
                 {"type": "url_citation", "url": url, "title": "Report", "start_index": 0,
                  "end_index": len(text)}]}]}]}})


def write_log(path: Path, srv: EvidenceServer, records: int, chunk: int) -> None:
    """A log of `records` records, each citing the report page of its chunk on `srv` (`/report/<block>`)."""
    path.write_text("\n".join(record(i, srv.url(f"/report/{i // chunk}")) for i in range(records)) + "\n",
                    encoding="utf-8")


@contextlib.contextmanager
def report_server(records: int, chunk: int, open_blocks: int) -> Iterator[tuple[EvidenceServer, threading.Event]]:
    """A server of one report page per chunk, stating what each `record` cites, and the gate of the later pages."""
    gate = threading.Event()
    with EvidenceServer() as srv:
        for block in range(records // chunk):
            paragraphs = [f"Station {i} reported {i % 7 + 10} degrees at noon." for i in
                          range(block * chunk, (block + 1) * chunk)]
            held = gate if block >= open_blocks else None
            srv.route(f"/report/{block}", Reply(200, html_page(f"Report {block}", *paragraphs), gate=held))
        try:
            yield srv, gate
        finally:
            gate.set()  # before the server stops, so no request is left held


def kill_when_saved(proc: subprocess.Popen[bytes], saved: Callable[[], int], at_least: int, timeout: float) -> None:
    """SIGKILL `proc` once `saved()` reaches `at_least`; it must still be running until then, and
    get there within `timeout` seconds (else the test fails: the run is killed all the same)."""
    deadline = time.monotonic() + timeout
    while saved() < at_least:
        assert proc.poll() is None, "the run ended before it could be interrupted"
        if time.monotonic() > deadline:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            pytest.fail(f"{saved()} rows saved after {timeout:.0f} s, not the {at_least} the test waits for")
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
