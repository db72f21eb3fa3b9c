"""The flags: help texts, `--version`, usage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tlmscore
from tlmscore.cli import main
from tlmscore.cli._args import build_parser, settings_from_args
from tlmscore.settings import Settings

EXIT_USAGE = 2


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


def test_an_unknown_flag_is_one_line_naming_its_command_help(tmp_path: Path, demo_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["score", str(demo_path), "-o", str(tmp_path / "o.jsonl"), "--no-such-flag"])
    err = capsys.readouterr().err
    assert exc.value.code == EXIT_USAGE
    assert err == "tlmscore: error: unrecognized arguments: --no-such-flag (see tlmscore score --help)\n"


def test_network_flags_reach_the_settings(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("", encoding="utf-8")
    args = build_parser().parse_args(["prepare", "in.jsonl", "-o", "out.jsonl", "--per-host", "3", "--proxy",
                                      "http://proxy.test:3128", "--trust-env", "--ca-bundle", str(ca),
                                      "--trust-store", "certifi"])
    settings = settings_from_args(args)
    assert (settings.per_host, settings.proxy, settings.trust_env) == (3, "http://proxy.test:3128", True)
    assert (settings.ca_bundle, settings.trust_store) == (ca, "certifi")
    defaults = settings_from_args(build_parser().parse_args(["prepare", "in.jsonl", "-o", "out.jsonl"]))
    assert (defaults.per_host, defaults.proxy, defaults.trust_env, defaults.ca_bundle) == (6, None, False, None)
    assert defaults.trust_store == "system"
