"""What the install holds: an OTLP protobuf body (a documented input) reads without an extra, and where the
package that reads it is missing anyway, the command says so in one line.

The missing package is made missing for real: the command runs in a process whose `sitecustomize`
puts None in `sys.modules` for it, so its import fails as it does where it is not installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES, ROOT
from tlmscore.cli import main

BODY = FIXTURES / "traces" / "openai-v2" / "bodies" / "001.binpb"
"""A recorded OTLP/HTTP protobuf body of the official OpenAI instrumentation's spans."""


def test_the_protobuf_reader_is_a_dependency_of_the_base_install() -> None:
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11's TOML reader")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {re.split(r"[<>=\[; ]", requirement, maxsplit=1)[0] for requirement in project["dependencies"]}
    assert "opentelemetry-proto" in names  # which brings protobuf


def test_a_protobuf_body_reads_into_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.jsonl"
    assert main(["prepare", str(BODY), "-o", str(out), "--offline", "--quiet", "--cache-dir", str(tmp_path)]) == 0
    assert out.read_text(encoding="utf-8").count("\n") >= 1
    assert "Traceback" not in capsys.readouterr().err


def test_without_the_protobuf_package_a_protobuf_body_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nfor name in ('google.protobuf', 'opentelemetry.proto'):\n    sys.modules[name] = None\n",
        encoding="utf-8")
    # pydantic's plug-ins off: the dev install's logfire plug-in needs protobuf too, and would warn at import
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)]),
           "PYDANTIC_DISABLE_PLUGINS": "__all__"}
    proc = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", str(BODY), "-o", str(tmp_path / "rows.jsonl"),
                           "--offline", "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"tlmscore: error: {BODY}: an OTLP protobuf body needs the opentelemetry-proto package "
                           "(pip install opentelemetry-proto): ")
