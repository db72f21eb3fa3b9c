"""What a newcomer meets first: the help texts, `--version`, and one clear line for every bad path or option.

Each bad path is refused with exit 2 before work starts (no cache folder made, no output written).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

import tlmscore
from tlmscore.cli import main
from tlmscore.settings import Settings

EXIT_NO_ROWS = 1
EXIT_USAGE = 2


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


def help_text(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_the_help_says_what_the_tool_does(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(["--help"], capsys)
    assert "Score logged LLM answers for trustworthiness" in text
    assert "grounding in the evidence, not truth" in text
    assert "Argument parsing" not in text  # not a module docstring
    assert re.search(r"^\s+score\s+prepare, then score", text, re.MULTILINE)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert help_text(["--version"], capsys).strip() == f"tlmscore {tlmscore.__version__}"


def test_score_help_is_grouped_with_the_settings_defaults_and_two_examples(
        capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(["score", "--help"], capsys)
    headings = [line.rstrip(":") for line in text.splitlines() if re.fullmatch(r"[a-z][^:]*:", line)]
    assert headings == ["options", "input", "output", "scoring", "evidence (web pages the answers cite)",
                        "pages read by a model (for pages that refuse fetchers; docs/fetching.md)",
                        "engine (where the run happens)", "annotations (scores written back onto traces)", "examples"]
    ungrouped = text[text.index("\noptions:"):text.index("\ninput:")].split()
    assert ungrouped == ["options:", "-h,", "--help", "show", "this", "help", "message", "and", "exit"]
    flat = " ".join(text.split())
    defaults = Settings.model_construct()
    assert f"parallel fetches (default {defaults.concurrency})" in flat
    assert f"parallel fetches per host (default {defaults.per_host})" in flat
    assert f"(default {defaults.timeout:g})" in flat and f"(default {defaults.chunk_size})" in flat
    assert text.index("--scorer") < text.index("--engine")  # the Ray flags come last
    examples = text[text.index("examples:"):].splitlines()[1:]
    assert len([line for line in examples if line.strip().startswith("tlmscore score ")]) == 2


def test_an_unknown_flag_shows_the_usage_of_its_command(tmp_path: Path, demo_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["score", str(demo_path), "-o", str(tmp_path / "o.jsonl"), "--no-such-flag"])
    err = capsys.readouterr().err
    assert exc.value.code == EXIT_USAGE
    assert err.startswith("usage: tlmscore score ") and "--annotate-threshold" in err
    assert err.strip().endswith("tlmscore score: error: unrecognized arguments: --no-such-flag")


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


def test_a_test_never_gets_the_users_page_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Settings made without a cache folder, in a test or at a test module's import, point into the tests'
    own folders (tests/conftest.py), so no test reads or fills ~/.cache/tlmscore."""
    import tests.convert.test_provider_shapes as made_at_import

    user = Path.home() / ".cache" / "tlmscore"
    here = Settings().cache_dir
    assert here != user and here.is_relative_to(tmp_path_factory.getbasetemp())
    assert made_at_import.OFFLINE.cache_dir.is_relative_to(tempfile.gettempdir())  # made at import or in this test
    assert Settings().cache_dir == here  # the same folder all through one test
