"""One clear line for every bad path or option.

Each bad path is refused with exit 2 before work starts (no cache folder made, no output written).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES
from tlmscore.cli import main

EXIT_USAGE = 2


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


def test_a_folder_as_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["prepare", str(tmp_path), "-o", str(tmp_path / "o.jsonl")], capsys)
    assert code == EXIT_USAGE
    assert err.strip() == (f"tlmscore: error: {tmp_path}: is a folder; give the input files in it "
                           f"(e.g. {tmp_path}/*.jsonl)")


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder this process may not create files in (root may write anywhere but in sysfs)."""
    if os.geteuid() == 0:
        return Path("/sys")
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o555)
    return folder


def test_an_unwritable_output_is_refused_before_work(tmp_path: Path, demo_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    folder = unwritable_folder(tmp_path)
    cache = tmp_path / "cache"
    code, err = run(["prepare", str(demo_path), "-o", str(folder / "o.jsonl"), "--cache-dir", str(cache)], capsys)
    assert code == EXIT_USAGE
    assert err.startswith(f"tlmscore: error: {folder / 'o.jsonl'}: cannot be written: {folder}: ")
    assert "Permission denied" in err and len(err.strip().splitlines()) == 1
    assert not cache.exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="Linux's /proc")
def test_an_output_in_a_folder_that_makes_no_files_says_so(tmp_path: Path, demo_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """/proc exists, but a file cannot be made in it: not "No such file or directory"."""
    code, err = run(["prepare", str(demo_path), "-o", "/proc/out.jsonl", "--cache-dir", str(tmp_path)], capsys)
    assert code == EXIT_USAGE
    assert err.strip() == "tlmscore: error: /proc/out.jsonl: cannot be written: /proc takes no new files"


def test_an_output_under_a_file_is_refused(tmp_path: Path, demo_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a folder", encoding="utf-8")
    for out in (blocker / "o.jsonl", blocker / "deeper" / "o.jsonl"):
        code, err = run(["prepare", str(demo_path), "-o", str(out)], capsys)
        assert code == EXIT_USAGE
        assert err.strip() == f"tlmscore: error: {out}: cannot be written: {blocker} is a file, not a folder"


def test_a_missing_output_folder_is_named(tmp_path: Path, demo_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nowhere" / "o.jsonl"
    code, err = run(["prepare", str(demo_path), "-o", str(out)], capsys)
    assert code == EXIT_USAGE
    assert err.strip() == f"tlmscore: error: {out}: cannot be written: no folder {out.parent}"


def test_an_existing_folder_as_output_is_refused_before_work(tmp_path: Path, demo_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scores.parquet"
    out.mkdir()
    cache = tmp_path / "cache"
    code, err = run(["score", str(demo_path), "-o", str(out), "--cache-dir", str(cache)], capsys)
    assert code == EXIT_USAGE
    assert err.strip() == (f"tlmscore: error: {out}: is a folder; OUT must be a file name such as "
                           f"{out / 'scores.parquet'}")
    assert not cache.exists() and not list(out.iterdir())


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_the_output_is_checked_the_same_on_either_engine_before_any_work(
        tmp_path: Path, demo_path: Path, engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows"
    code, err = run(["prepare", str(demo_path), "-o", str(out), "--engine", engine], capsys)
    assert code == EXIT_USAGE
    assert err.strip() == f"tlmscore: error: {out}: output must end in one of .jsonl, .csv, .parquet"
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()  # Ray never started


@pytest.mark.parametrize("flag", ["--pages", "--batch-input"])
def test_a_missing_pages_or_batch_input_file_is_named(tmp_path: Path, demo_path: Path, flag: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.jsonl"
    code, err = run(["prepare", str(demo_path), "-o", str(tmp_path / "o.jsonl"), flag, str(missing)], capsys)
    assert code == EXIT_USAGE
    assert err.strip() == f"tlmscore: error: {missing}: no such file ({flag})"


def test_the_judge_without_a_model_names_the_flag(tmp_path: Path, demo_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["score", str(demo_path), "-o", str(tmp_path / "o.jsonl"), "--scorer", "judge"], capsys)
    assert code == EXIT_USAGE
    assert err.strip() == "tlmscore: error: --scorer judge needs --model NAME (the judge model's name at --base-url)"
    assert "Field required" not in err


def test_a_missing_ca_bundle_is_a_usage_error(tmp_path: Path, demo_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["prepare", str(demo_path), "-o", str(tmp_path / "o.jsonl"), "--ca-bundle", str(tmp_path / "no.pem")])
    assert code == 2
    assert "no such CA bundle" in capsys.readouterr().err


def test_bare_annotate_checks_the_store_each_input_is_read_from_by_its_content(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An OTLP export (found by its content, as the run finds it) goes back to OTLP: unconfigured, refused first."""
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", raising=False)
    spans = FIXTURES / "traces" / "genai-openai" / "span_only" / "traces.jsonl"
    code, err = run(["score", str(spans), "--offline", "--annotate", "-o", str(tmp_path / "o.jsonl")], capsys)
    assert code == EXIT_USAGE
    assert err.strip() == ("tlmscore: error: --annotate (back to each row's origin): --to otlp: set "
                           "OTEL_EXPORTER_OTLP_ENDPOINT (or _LOGS_ENDPOINT), or give otlp:URL")
    assert not (tmp_path / "o.jsonl").exists()
