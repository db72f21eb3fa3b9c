"""A real MLflow tracking server for tests: `mlflow server` on a free loopback port, SQLite in a temporary folder.

`MlflowProcess` starts the server (one worker, telemetry and the job runner off), waits until it
answers, kills it as a crash would and starts it again on the same port and database, and stops
that process (only it). `feed` runs the official `openai` client under the real
`mlflow.openai.autolog()` in a process of its own (autolog patches the client and MLflow keeps
process-wide state), against a fake OpenAI server, so the traces the server holds are those MLflow's
own instrumentation wrote.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

START_TIMEOUT = 600.0  # seconds; the first start creates the database on a shared two-core machine
QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
FEED = '''
import json, sys
from pathlib import Path

import mlflow
import openai

from tests.servers.openai_server import OpenAIServer

url, experiment, answers, calls = sys.argv[1], sys.argv[2], Path(sys.argv[3]), json.loads(Path(sys.argv[4]).read_text())
mlflow.set_tracking_uri(url)
mlflow.set_experiment(experiment)
mlflow.openai.autolog()
with OpenAIServer(answers) as fake:
    client = openai.OpenAI(base_url=fake.url, api_key="sk-fake", max_retries=0)
    for request in calls:
        create = client.chat.completions.create if "messages" in request else client.responses.create
        create(**request)
mlflow.flush_trace_async_logging()
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MlflowProcess:
    """`mlflow server` in `folder` (SQLite database, artifacts) on a fixed loopback port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """The `mlflow://HOST:PORT` prefix of an experiment's address."""
        return f"mlflow://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server and wait until it answers."""
        log = self.folder / "server.log"
        command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                   f"sqlite:///{self.folder / 'mlflow.db'}", "--default-artifact-root", str(self.folder / "artifacts"),
                   "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
        with log.open("ab") as out:
            self._proc = subprocess.Popen(command, env={**os.environ, **QUIET}, stdout=out, stderr=subprocess.STDOUT,
                                          cwd=self.folder, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self._proc.returncode}: {log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            time.sleep(0.5)  # polls the server's own health check, bounded by START_TIMEOUT
        raise RuntimeError(f"mlflow server did not answer within {START_TIMEOUT:.0f} s: {log.read_text()[-3000:]}")

    def _signal_group(self, kill: bool) -> None:
        """Signal the server and the worker it started (its own session), then wait for it."""
        if self._proc is None or self._proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, 9 if kill else 15)
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, 9)
            self._proc.wait()

    def kill(self) -> None:
        """Kill the server and its worker at once (SIGKILL), as a crash would."""
        self._signal_group(kill=True)

    def stop(self) -> None:
        """Stop the server (this process and its worker only)."""
        self._signal_group(kill=False)

    def feed(self, experiment: str, answers: Path, calls: list[dict[str, Any]], root: Path) -> None:
        """Make `calls` with the `openai` client under `mlflow.openai.autolog()`, traced to `experiment`."""
        listed = self.folder / f"{experiment}.calls.json"
        listed.write_text(json.dumps(calls), encoding="utf-8")
        done = subprocess.run([sys.executable, "-c", FEED, self.url, experiment, str(answers), str(listed)],
                              env={**os.environ, **QUIET, "PYTHONPATH": str(root)}, capture_output=True, text=True,
                              check=False, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"feeding MLflow failed: {done.stderr[-3000:]}")

    def traces(self, experiment_id: str) -> int:
        """How many traces the experiment holds."""
        body = {"locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": experiment_id}}],
                "max_results": 500}
        return len(httpx.post(f"{self.url}/api/3.0/mlflow/traces/search", json=body, timeout=30).json().get(
            "traces") or [])


@pytest.fixture(scope="module", name="server")
def mlflow_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowProcess]:
    """An `mlflow server` of its own for a test module, which may stop and start it (`server`)."""
    process = MlflowProcess(tmp_path_factory.mktemp("mlflow"))
    process.start()
    yield process
    process.stop()
