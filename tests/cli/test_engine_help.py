"""Help says what the engine flags do where they apply: `fixtures` has no engine, and OUT is a file on either."""

from __future__ import annotations

import pytest

from tlmscore.cli import main


def help_of(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_fixtures_help_names_no_engine(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of("fixtures", capsys)
    assert "--per-host" in text
    assert "ray" not in text and "--engine" not in text
    with pytest.raises(SystemExit) as refused:
        main(["fixtures", "check", ".", "--engine", "ray"])
    assert refused.value.code == 2  # not a flag of fixtures


@pytest.mark.parametrize("command", ["score", "prepare"])
def test_run_help_says_out_is_a_file_on_either_engine(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(help_of(command, capsys).split())
    assert "OUT.jsonl, OUT.csv or OUT.parquet (a file, on either engine)" in text
    assert "a folder)" not in text and "--engine {local,ray}" in text
