"""Every bad input a user gives the command line, as a table: the command, its exit code, the one line it prints.

Each row runs through `tlmscore.cli.main` (some through the real executable too) in a folder of the
user's files: it must exit with its code, print exactly its line on stderr (a line ending in `…`
is matched up to there), print no traceback, and leave every file of the folder as it was, no
output, manifest or checkpoint made. `{tmp}` is that folder, where the command runs; `logs.jsonl`
is the bundled demo, `link.jsonl` a symbolic link to it, `notes.txt` a file, `earlier.jsonl` the
output of an earlier run beside its manifest, `ids.txt` response ids, `rows.parquet.partial/` a
Parquet run's checkpoint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES, ROOT
from tlmscore.cli import main

PAGES = str(FIXTURES / "pages")
CACHE_FIX = "(give --cache-dir DIR or set TLMSCORE_CACHE_DIR to a writable folder, or run --offline)"


@dataclass(frozen=True)
class Case:
    """One bad input: the arguments (`{tmp}` for the folder), the exit code, stderr's one line."""

    args: str
    code: int
    line: str
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables set for this row (an empty value: the variable is unset)."""


RUN = "score logs.jsonl -o out.jsonl --offline --pages " + PAGES
"""A run that works: each row adds what makes it bad."""
NO_CACHE_ENV = {"TLMSCORE_CACHE_DIR": "", "XDG_CACHE_HOME": ""}

TABLE: dict[str, Case] = {
    # their data: nothing a user gave is overwritten by its own run
    "the output is the input": Case(
        "score logs.jsonl -o logs.jsonl --offline", 2,
        "logs.jsonl: is an input and the output (-o): it would be overwritten; give another -o OUT"),
    "the output is the input through a symbolic link": Case(
        "score link.jsonl -o ./logs.jsonl", 2,
        "link.jsonl: is an input and the output (-o): it would be overwritten; give another -o OUT"),
    "the output is the input spelt another way": Case(
        "prepare sub/../logs.jsonl -o {tmp}/logs.jsonl", 2,
        "sub/../logs.jsonl: is an input and the output (-o): it would be overwritten; give another -o OUT"),
    "the input is the output's manifest": Case(
        "score earlier.jsonl.manifest.json -o earlier.jsonl", 2,
        "earlier.jsonl.manifest.json: is an input and the output's manifest (OUT.manifest.json): it would be "
        "overwritten; give another -o OUT"),
    "a --pages folder is the output's checkpoint": Case(
        "prepare logs.jsonl -o rows.parquet --pages rows.parquet.partial", 2,
        "rows.parquet.partial: is a --pages file and the output's checkpoint (rows.parquet.partial): it would be "
        "overwritten; give another -o OUT"),
    "a --batch-input file is the output": Case(
        "prepare logs.jsonl -o earlier.jsonl --batch-input earlier.jsonl", 2,
        "earlier.jsonl: is a --batch-input file and the output (-o): it would be overwritten; give another -o OUT"),
    "the input is the cache folder": Case(
        "score logs.jsonl -o out.jsonl --cache-dir logs.jsonl", 2,
        "logs.jsonl: is an input and the cache folder (--cache-dir): it would be overwritten; give another "
        "--cache-dir DIR"),
    "the output is the cache folder": Case(
        "score logs.jsonl -o c.jsonl --cache-dir c.jsonl", 2,
        "c.jsonl: is the output (-o) and the cache folder (--cache-dir); give another --cache-dir DIR"),
    "an annotation file is the input": Case(
        RUN + " --annotate otlp-json:logs.jsonl", 2,
        "logs.jsonl: is an input and an annotation file (--annotate): it would be overwritten; give another "
        "--annotate target"),
    "an annotation file is the output": Case(
        RUN + " --annotate otlp-json:out.jsonl", 2,
        "out.jsonl: is the output (-o) and an annotation file (--annotate); give another --annotate target"),
    "an input is the annotations' progress file": Case(
        "score scores.jsonl.annotate-progress -o scores.jsonl --offline --annotate otlp-json:events.json", 2,
        "scores.jsonl.annotate-progress: is an input and the annotations' progress file (OUT.annotate-progress): it "
        "would be overwritten; give another -o OUT"),
    "calibrate's output is the scored file": Case(
        "calibrate logs.jsonl --labels correct -o logs.jsonl", 2,
        "logs.jsonl: is SCORED and the output (-o): it would be overwritten; give another -o CALIB.json"),
    "annotate's side file is SCORED": Case(
        "annotate earlier.jsonl --to otlp-json:events.json --failed earlier.jsonl", 2,
        "earlier.jsonl: is SCORED and the side file of annotations that failed: it would be overwritten; give "
        "another --failed FILE"),
    "an annotation file is SCORED": Case(
        "annotate earlier.jsonl --to otlp-json:earlier.jsonl", 2,
        "earlier.jsonl: is SCORED and an annotation file (--to): it would be overwritten; give another --to target"),
    "pull's output is its file of ids": Case(
        "pull ids.txt -o ids.txt", 2,
        "ids.txt: is a file of ids and the output (-o): it would be overwritten; give another -o OUT.jsonl"),
    # the cache
    "HOME cannot be written (the default cache)": Case(
        "score logs.jsonl -o out.jsonl", 2,
        "/sys/.cache/tlmscore: the cache folder cannot be written: /sys: …", env={"HOME": "/sys", **NO_CACHE_ENV}),
    "--cache-dir under a file": Case(
        "score logs.jsonl -o out.jsonl --cache-dir notes.txt/cache", 2,
        f"notes.txt/cache: the cache folder cannot be written: {{tmp}}/notes.txt is a file, not a folder {CACHE_FIX}"),
    "--cache-dir is a file (score)": Case(
        "score logs.jsonl -o out.jsonl --cache-dir notes.txt", 2,
        "notes.txt: the cache folder (--cache-dir) is a file; give a folder"),
    "--cache-dir is a file (prepare, offline)": Case(
        "prepare logs.jsonl -o out.jsonl --offline --cache-dir notes.txt", 2,
        "notes.txt: the cache folder (--cache-dir) is a file; give a folder"),
    "--cache-dir is a file (fixtures)": Case(
        "fixtures check sub --cache-dir notes.txt", 2,
        "notes.txt: the cache folder (--cache-dir) is a file; give a folder"),
    "--cache-dir is a file (cache stats)": Case(
        "cache stats --cache-dir notes.txt", 2, "notes.txt: the cache folder (--cache-dir) is a file; give a folder"),
    "--cache-dir is a file (cache clear)": Case(
        "cache clear --cache-dir notes.txt", 2, "notes.txt: the cache folder (--cache-dir) is a file; give a folder"),
    # files that are not there
    "a missing --calibration file": Case(
        RUN + " --calibration missing.json", 2, "missing.json: no such file (--calibration)"),
    "calibrate -o into a missing folder": Case(
        "calibrate logs.jsonl --labels correct -o missing-folder/c.json", 2,
        "missing-folder/c.json: cannot be written: no folder {tmp}/missing-folder"),
    "a missing input": Case("score missing.jsonl -o out.jsonl", 2, "missing.jsonl: no such file"),
    "a folder as input": Case(
        "score sub -o out.jsonl", 2, "sub: is a folder; give the input files in it (e.g. sub/*.jsonl)"),
    "--pages pointing at nothing": Case(
        "score logs.jsonl -o out.jsonl --pages nothing", 2, "nothing: no such file (--pages)"),
    "a missing --batch-input": Case(
        "score logs.jsonl -o out.jsonl --batch-input nothing.jsonl", 2, "nothing.jsonl: no such file (--batch-input)"),
    "a missing --ca-bundle": Case("score logs.jsonl -o out.jsonl --ca-bundle no.pem", 2, "no.pem: no such CA bundle"),
    "an output of no known format": Case(
        "score logs.jsonl -o out.txt", 2, "out.txt: output must end in one of .jsonl, .csv, .parquet"),
    "an output folder that is not there": Case(
        "score logs.jsonl -o nowhere/out.jsonl", 2, "nowhere/out.jsonl: cannot be written: no folder {tmp}/nowhere"),
    "calibrate a missing file": Case(
        "calibrate missing.jsonl --labels correct -o c.json", 2, "missing.jsonl: no such file"),
    "compare a missing file": Case("compare missing.jsonl logs.jsonl", 2, "missing.jsonl: no such file"),
    "annotate a missing file": Case(
        "annotate missing.jsonl --to otlp-json:events.json", 2, "missing.jsonl: no such file"),
    "fixtures in a missing folder": Case("fixtures check nofolder", 2, "nofolder: not a directory"),
    # values: one line naming the flag and what it takes
    "--chunk-size 0": Case(RUN + " --chunk-size 0", 2, "--chunk-size 0: must be at least 1"),
    "--timeout -5": Case(RUN + " --timeout -5", 2, "--timeout -5: must be more than 0"),
    "--concurrency 0": Case(RUN + " --concurrency 0", 2, "--concurrency 0: must be at least 1"),
    "--concurrency 5000": Case(RUN + " --concurrency 5000", 2, "--concurrency 5000: must be at most 1024"),
    "--per-host 0": Case(RUN + " --per-host 0", 2, "--per-host 0: must be at least 1"),
    "--extract-timeout 0": Case(RUN + " --extract-timeout 0", 2, "--extract-timeout 0: must be more than 0"),
    "--chunk-size abc": Case(
        RUN + " --chunk-size abc", 2, "argument --chunk-size: invalid int value: 'abc' (see tlmscore score --help)"),
    "--allow-host a URL": Case(
        RUN + " --allow-host http://127.0.0.1:8080", 2,
        "--allow-host: 'http://127.0.0.1:8080' is not a host name or IP address (give the host alone, as "
        "127.0.0.1 or wiki.corp.example: no scheme, port, path or network)"),
    "--allow-host a network": Case(
        RUN + " --allow-host 10.0.0.0/8", 2, "--allow-host: '10.0.0.0/8' is not a host name or IP address …"),
    "--archive-url not a URL": Case(
        RUN + " --archive fallback --archive-url archive.org", 2,
        "--archive-url archive.org: the archive must be an http:// or https:// URL, not 'archive.org'"),
    "--proxy not a URL": Case(
        RUN + " --proxy proxy:3128", 2,
        "--proxy proxy:3128: the proxy must be an http:// or https:// URL, not 'proxy:3128'"),
    "--page-base-url not a URL": Case(
        RUN + " --page-source chat --page-base-url perplexity --page-model sonar", 2,
        "--page-base-url perplexity: the page model's base URL must be an http:// or https:// URL, not 'perplexity'"),
    "--fetchers 0": Case(RUN + " --engine ray --fetchers 0", 2, "--fetchers 0: must be at least 1"),
    "--annotate-threshold 2": Case(
        RUN + " --annotate --annotate-threshold 2", 2, "--annotate-threshold 2: must be between 0 and 1"),
    "--annotate-timeout 0": Case(
        RUN + " --annotate --annotate-timeout 0", 2, "--annotate-timeout 0: must be more than 0 seconds"),
    "annotate --threshold 5": Case(
        "annotate earlier.jsonl --to otlp-json:events.json --threshold 5", 2, "--threshold 5: must be between 0 and 1"),
    "annotate --timeout -1": Case(
        "annotate earlier.jsonl --to otlp-json:events.json --timeout -1", 2,
        "--timeout -1: must be more than 0 seconds"),
    "fixtures --score-tolerance -1": Case(
        "fixtures check sub --score-tolerance -1", 2, "--score-tolerance -1: must be at least 0"),
    "--annotate-deadline -1": Case(
        RUN + " --annotate --annotate-deadline -1", 2, "--annotate-deadline -1: must be at least 0 seconds"),
    "--since with a file": Case(
        RUN + " --since 2025-01-01", 2,
        "--since, --until and --limit apply to a live source (phoenix://HOST:PORT/PROJECT)"),
    "--option without =": Case(RUN + " --option temperature", 2, "--option 'temperature': expected KEY=VALUE"),
    "a judge option of the wrong type": Case(
        RUN + " --scorer judge --model m --option temperature=warm", 2,
        "judge scorer options: temperature: Input should be a valid number, unable to parse string as a number"),
    "--scorer judge without --model": Case(
        RUN + " --scorer judge", 2, "--scorer judge needs --model NAME (the judge model's name at --base-url)"),
    "--judge-batch without the judge": Case(RUN + " --judge-batch", 2, "--judge-batch needs --scorer judge"),
    "--format unknown": Case(
        RUN + " --format nope", 2, "unknown input format 'nope' (known: records, …"),
    "--urls unknown": Case(
        RUN + " --urls some", 2,
        "argument --urls: invalid choice: 'some' (choose from 'cited', 'sources', 'all') (see tlmscore score --help)"),
    "calibrate --folds 0": Case(
        "calibrate logs.jsonl --labels correct -o c.json --folds 0", 2, "--folds 0: must be at least 2"),
    "pull --concurrency 0": Case("pull resp_1 -o pulled.jsonl --concurrency 0", 2, "--concurrency must be at least 1"),
    # the command line itself
    "an unknown flag": Case(RUN + " --bogus", 2, "unrecognized arguments: --bogus (see tlmscore score --help)"),
    "an unknown scorer": Case(
        RUN + " --scorer nope", 2,
        "argument --scorer: invalid choice: 'nope' (choose from 'grounding', 'judge', 'tlm') "
        "(see tlmscore score --help)"),
    "an unknown command": Case("nope", 2, "argument COMMAND: invalid choice: 'nope' (choose from …"),
    "no command": Case("", 2, "the following arguments are required: COMMAND (see tlmscore --help)"),
    "score without -o": Case(
        "score logs.jsonl", 2, "the following arguments are required: -o/--output (see tlmscore score --help)"),
    # judge-server: the model file and the flags, checked before a download or a model load
    "judge-server: no such model file": Case(
        "judge-server --model missing.gguf", 2, "missing.gguf: no such model file"),
    "judge-server: a model file that is not GGUF": Case(
        "judge-server --model notes.txt", 2, "notes.txt: not a GGUF model file"),
    "judge-server: an unknown model to fetch": Case(
        "judge-server --fetch llama-70b", 2,
        "argument --fetch: invalid choice: 'llama-70b' (choose from 'qwen2.5-coder-0.5b', 'qwen2.5-coder-1.5b') "
        "(see tlmscore judge-server --help)"),
    "judge-server: --fetch-only without --fetch": Case(
        "judge-server --model logs.jsonl --fetch-only", 2, "--fetch-only goes with --fetch NAME"),
    "judge-server: a port out of range": Case(
        "judge-server --fetch qwen2.5-coder-1.5b --port 70000", 2, "--port 70000: give a port from 1 to 65535"),
}

REAL = ["the output is the input", "HOME cannot be written (the default cache)", "--cache-dir is a file (cache stats)",
        "--chunk-size 0", "an unknown flag", "calibrate -o into a missing folder"]
"""Rows also run through the real executable (`python -m tlmscore`), in a process of their own."""


@pytest.fixture
def users_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder of a user's files (see the module's docstring), the current folder; its own page cache."""
    shutil.copy(FIXTURES / "demo.jsonl", tmp_path / "logs.jsonl")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "logs.jsonl")
    (tmp_path / "notes.txt").write_text("a file, not a folder\n", encoding="utf-8")
    (tmp_path / "earlier.jsonl").write_text('{"id": "r1"}\n', encoding="utf-8")
    (tmp_path / "earlier.jsonl.manifest.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "scores.jsonl.annotate-progress").write_text('{"id": "r1"}\n', encoding="utf-8")
    (tmp_path / "rows.parquet.partial").mkdir()
    (tmp_path / "rows.parquet.partial" / "r.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "ids.txt").write_text("resp_1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TLMSCORE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with its bytes (None for a folder or a link)."""
    return {str(p.relative_to(folder)): None if p.is_dir() or p.is_symlink() else p.read_bytes()
            for p in sorted(folder.rglob("*"))}


def argv(case: Case, folder: Path) -> list[str]:
    return [part.replace("{tmp}", str(folder)) for part in case.args.split()]


def set_env(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in case.env.items():
        if value:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)


def check(case: Case, folder: Path, code: int, output: tuple[str, str], before: dict[str, bytes | None]) -> None:
    """The row's code and one line (`output`: stdout, stderr), no traceback, and the user's folder as it was."""
    out, err = output
    assert "Traceback" not in out + err
    assert code == case.code, err
    expected = "tlmscore: error: " + case.line.replace("{tmp}", str(folder))
    assert len(err.splitlines()) == 1, err
    line = err.rstrip("\n")
    if expected.endswith("…"):
        assert line.startswith(expected.removesuffix("…")), line
    else:
        assert line == expected
    assert snapshot(folder) == before


@pytest.mark.parametrize("name", list(TABLE))
def test_each_bad_input_is_one_line_and_its_exit_code(name: str, users_files: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    case = TABLE[name]
    set_env(case, monkeypatch)
    before = snapshot(users_files)
    try:
        code = main(argv(case, users_files))
    except SystemExit as exc:  # argparse's own errors exit from inside the parser
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    check(case, users_files, code, (captured.out, captured.err), before)


@pytest.mark.parametrize("name", REAL)
def test_the_executable_prints_the_same_line(name: str, users_files: Path) -> None:
    case = TABLE[name]
    env = {**os.environ, **case.env}
    env = {key: value for key, value in env.items() if value}
    before = snapshot(users_files)
    proc = subprocess.run([sys.executable, "-m", "tlmscore", *argv(case, users_files)], capture_output=True,
                          text=True, timeout=120, check=False, env=env, cwd=users_files)
    check(case, users_files, proc.returncode, (proc.stdout, proc.stderr), before)


def test_a_row_that_is_not_bad_runs(users_files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The rows add one bad thing each to a run that works: without it, the run writes its output."""
    assert main([*RUN.split(), "--quiet", "--cache-dir", str(users_files / "cache")]) == 0
    assert (users_files / "out.jsonl").is_file()
    assert "Traceback" not in capsys.readouterr().err


DOC = ROOT / "docs" / "development.md"
BEGIN = "<!-- bad-input: made by `python -m tests.cli.test_bad_input` from its TABLE; do not edit -->"
END = "<!-- /bad-input -->"


def markdown() -> str:
    """The table as docs/development.md shows it: each row's command, exit code and line."""
    rows = ["| bad input | command | exit | the line on stderr |", "|---|---|---|---|"]
    for name, case in TABLE.items():
        command = f"tlmscore {case.args}".strip().replace(str(ROOT) + os.sep, "")
        env = "".join(f"{key}={value} " for key, value in case.env.items())
        rows.append(f"| {name} | `{env}{command}` | {case.code} | `tlmscore: error: {case.line}` |")
    return "\n".join(rows)


def with_table(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{markdown()}\n\n{END}{tail}"


def test_the_development_page_shows_this_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert with_table(text) == text, "run: python -m tests.cli.test_bad_input"


if __name__ == "__main__":
    DOC.write_text(with_table(DOC.read_text(encoding="utf-8")), encoding="utf-8")
