"""`--engine ray` refuses what it cannot do before Ray starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES
from tlmscore.cli import main

BATCH_OUT = FIXTURES / "batch_output.jsonl"


def test_ray_refuses_what_it_cannot_do_yet_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    code = main(["score", str(BATCH_OUT), "-o", str(out), "--engine", "ray", "--offline", "--quiet",
                 "--cache-dir", str(tmp_path / "c"), "--hydrate"])
    assert code == 2
    assert capsys.readouterr().err == "tlmscore: error: --hydrate: not available with --engine ray yet\n"  # one line
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()  # Ray never started
    assert not out.exists()


def test_ray_refuses_a_live_source_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    code = main(["prepare", "phoenix://127.0.0.1:9/project", "-o", str(out), "--engine", "ray", "--quiet",
                 "--cache-dir", str(tmp_path / "c")])
    assert code == 2
    refused = "live sources: not available with --engine ray yet (read them on one machine)"
    assert capsys.readouterr().err == f"tlmscore: error: {refused}\n"
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    assert not out.exists()
