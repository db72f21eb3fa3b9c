"""A real Ray cluster and real page servers on loopback, for the Ray engine's tests and benchmark.

Ray binds a node to the machine's interface address whatever it is told, so everything runs in
a network namespace that has only loopback (`unshare -n`), where Ray uses 127.0.0.1; a new PID
namespace too (`-p -f --mount-proc`), so `ray stop` sees only this cluster's processes and the
kernel ends them all when the driver exits. Nodes join with the cluster's auth token, given to
every process through the environment.

`PageServers` serves made-up article pages from several loopback addresses (one host each),
counting the requests per URL and the most requests in flight at once per host.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.servers.evidence_server import html_page
from tests.support.paths import ROOT

BIN = Path(sys.executable).parent
PORT = 6380
PAGE_PORT = 8080


def namespaced(argv: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `argv` in new network and PID namespaces (loopback only), from the project folder."""
    command = ["unshare", "-n", "-p", "-f", "--mount-proc", "--kill-child", *argv]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def can_namespace() -> str | None:
    """Why this machine cannot run the cluster tests (None: it can)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare and ip (util-linux, iproute2)"
    probe = namespaced(["true"], timeout=30)
    if probe.returncode != 0:
        return f"cannot make a network namespace here: {probe.stderr.strip()[:200]}"
    return None


def run_scenarios(work: Path, module: str, *args: str, timeout: float) -> dict[str, Any]:
    """Run a scenario module (`python -m MODULE WORK ARGS`) in the namespaces; the report it wrote.

    Only tests of the `system` tier call it (`pytest.mark.system("ray")`: root and the `ray` extra).
    """
    done = namespaced([sys.executable, "-m", module, str(work), *args], timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads((work / "report.json").read_text(encoding="utf-8"))
    return report


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Host

    def do_GET(self) -> None:
        self.server.enter(self.path)
        try:
            time.sleep(self.server.delay)
        finally:
            self.server.leave()
        number = self.path.rsplit("/", 1)[-1]
        body = html_page(f"Page {number} on {self.server.name}",
                         f"Fact {number}: the value recorded on {self.server.name} is {int(number) * 7}.",
                         "Further background that an extractor keeps as article text, " * 4)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Quiet."""


class _Host(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, name: str, delay: float) -> None:
        super().__init__((name, PAGE_PORT), _Handler)
        self.name, self.delay = name, delay
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.in_flight = self.max_in_flight = 0

    def enter(self, path: str) -> None:
        with self.lock:
            self.counts[path] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def reset(self) -> dict[str, Any]:
        with self.lock:
            seen = {"counts": dict(self.counts), "max_in_flight": self.max_in_flight}
            self.counts.clear()
            self.max_in_flight = 0
            return seen


class PageServers:
    """Article pages at `http://127.0.0.N:8080/p/<n>` for several N; use with `with`."""

    def __init__(self, hosts: int, delay: float = 0.02) -> None:
        self.names = [f"127.0.0.{n}" for n in range(2, 2 + hosts)]
        self._hosts = [_Host(name, delay) for name in self.names]
        self._threads = [threading.Thread(target=h.serve_forever, kwargs={"poll_interval": 0.05}) for h in self._hosts]

    def __enter__(self) -> PageServers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for host in self._hosts:
            host.shutdown()
            host.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def requests(self) -> int:
        """Requests so far, over all hosts."""
        return sum(sum(h.counts.values()) for h in self._hosts)

    def reset(self) -> dict[str, Any]:
        """Per host: requests per path and the most in flight at once since the last reset."""
        return {h.name: h.reset() for h in self._hosts}


def _message(text: str, cites: list[tuple[str, str]]) -> dict[str, Any]:
    annotations = []
    for url, host in cites:
        link = f" ([{host}]({url}))"
        annotations.append({"type": "url_citation", "start_index": len(text) + 1, "end_index": len(text) + len(link),
                            "title": f"Page on {host}", "url": url})
        text += link
    return {"id": f"msg_{secrets.token_hex(8)}", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": annotations}]}


def record(n: int, urls: list[str], previous: str | None = None) -> dict[str, Any]:
    """A web-search answer citing `urls` (a follow-up of `previous` when given)."""
    cites = [(u, u.split("/")[2].split(":")[0]) for u in urls]
    search = {"id": f"ws_{n:08d}", "type": "web_search_call", "status": "completed",
              "action": {"type": "search", "query": f"question {n}",
                         "sources": [{"type": "url", "url": u} for u in urls]}}
    request: dict[str, Any] = {"model": "gpt-5-mini", "input": f"Question {n}: what do the pages say?",
                               "tools": [{"type": "web_search"}], "include": ["web_search_call.action.sources"]}
    if previous:
        request["previous_response_id"] = previous
    response = {"id": f"resp_{n:08d}", "object": "response", "created_at": 1_760_000_000 + n, "status": "completed",
                "model": "gpt-5-mini", "output": [search, _message(f"Answer {n}: the pages agree.", cites)]}
    return {"id": f"gen-{n}", "request": request, "response": response}


def generate(folder: Path, records: int, urls: int, hosts: list[str], files: int = 2) -> list[str]:
    """`records` records over `files` JSONL files (the last one gzipped), citing `urls` pages on `hosts`.

    Every tenth record continues the one before it; every hundredth line is not JSON.
    """
    pool = [f"http://{hosts[i % len(hosts)]}:{PAGE_PORT}/p/{i}" for i in range(urls)]
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / (f"gen-{k}.jsonl.gz" if k == files - 1 else f"gen-{k}.jsonl") for k in range(files)]
    lines: list[list[bytes]] = [[] for _ in paths]
    for n in range(records):
        if n % 100 == 99:
            line = b'{"id": "cut-off", "request": {"model"'
        else:
            cited = [pool[(n * 7 + k * 13) % urls] for k in range(3)] if n >= urls else [pool[n]]
            line = json.dumps(record(n, cited, f"resp_{n - 1:08d}" if n % 10 == 9 else None)).encode()
        lines[n * files // records].append(line)
    for path, content in zip(paths, lines, strict=True):
        data = b"\n".join(content) + b"\n"
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return [str(p) for p in paths]


class Cluster:
    """A head node and (`worker`) one worker node, started as separate processes with `ray start`."""

    def __init__(self, temp: Path, cpus: int = 2, memory: int = 200_000_000, *, worker: bool = True) -> None:
        self.temp, self.cpus, self.memory, self.with_worker = temp, cpus, memory, worker
        # Ray's own files (its sockets among them) in a short folder of their own: a socket path may not pass
        # 107 bytes, and a test's temporary folder grows with pytest's run count and its worker's name.
        self.sessions = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        self.address = f"127.0.0.1:{PORT}"
        self.worker: subprocess.Popen[bytes] | None = None
        self.nodes, self.worker_log = 0, ""
        self.starts: list[dict[str, Any]] = []  # each start of the worker: nodes seen, its exit code, its log

    def _node(self) -> list[str]:
        return [f"--num-cpus={self.cpus}", f"--object-store-memory={self.memory}", "--disable-usage-stats"]

    def __enter__(self) -> Cluster:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)
        os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
                           "RAY_USAGE_STATS_ENABLED": "0"})
        subprocess.run([str(BIN / "ray"), "start", "--head", f"--port={PORT}", "--include-dashboard=false",
                        f"--temp-dir={self.sessions}", *self._node()], check=True, timeout=180, capture_output=True)
        if self.with_worker:
            self.start_worker()
        return self

    def start_worker(self) -> None:
        """Start the worker node (a process group of its own, so it can be killed as one) and wait for it.

        On a loaded machine a worker's raylet can give up registering and `ray start` exits: it is started
        again (three tries); what the last try printed is kept in `worker_log` for the report.
        """
        import ray

        ray.init(address=self.address, log_to_driver=False)
        try:
            for attempt in range(3):
                known = {node["NodeID"] for node in ray.nodes()}  # a node killed before may still look alive
                log = self.temp.parent / f"worker-{attempt}.log"
                with log.open("wb") as sink:
                    self.worker = subprocess.Popen([str(BIN / "ray"), "start", f"--address={self.address}",
                                                    "--block", *self._node()], start_new_session=True,
                                                   stdout=sink, stderr=subprocess.STDOUT)
                deadline = time.monotonic() + 300
                while (not self._joined(ray, known) and self.worker.poll() is None
                       and time.monotonic() < deadline):
                    time.sleep(0.5)
                self.nodes = self._alive(ray)
                self.worker_log = log.read_text(encoding="utf-8", errors="replace")[-2000:]
                self.starts.append({"nodes": self.nodes, "exit": self.worker.poll(), "log": self.worker_log})
                if self._joined(ray, known) or self.worker.poll() is None:
                    return
        finally:
            ray.shutdown()

    @staticmethod
    def _joined(ray: Any, known: set[str]) -> bool:
        """Whether a node not in `known` is alive: the worker just started has registered."""
        return any(node["Alive"] and node["NodeID"] not in known for node in ray.nodes())

    @staticmethod
    def _alive(ray: Any) -> int:
        return sum(1 for n in ray.nodes() if n["Alive"])

    def kill_worker(self) -> None:
        """Kill the worker node and everything it runs, at once (SIGKILL to its process group).

        A worker whose `ray start` already ended (and was reaped) has no group left to kill.
        """
        if self.worker is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait(timeout=30)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.kill_worker()
        subprocess.run([str(BIN / "ray"), "stop", "--force"], timeout=120, capture_output=True, check=False)
        shutil.rmtree(self.sessions, ignore_errors=True)
