"""`tlmscore watch`: usage errors are one line and exit 2 before any store is asked; the status line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tlmscore.cli import main
from tlmscore.watch import Counts, StatusLine

EXIT_USAGE = 2


@pytest.mark.parametrize(("more", "said"), [
    (["--sample", "0"], "--sample 0: must be more than 0"),
    (["--sample", "1.5"], "--sample 1.5: must be more than 0"),
    (["--where", "size=3"], "--where 'size=3': expected FIELD=PATTERN"),
    (["--since", "yesterday"], "--since 'yesterday': not an ISO 8601 time"),
    (["--max-cost-per-day", "-1"], "--max-cost-per-day -1: must be at least 0"),
    (["--batch", "0"], "--batch 0: must be at least 1"),
])
def test_a_usage_error_is_one_line_and_exit_2(more: list[str], said: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["watch", "phoenix://127.0.0.1:9/p", "--state", str(tmp_path / "s.json"), "--offline", *more])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE
    assert len(lines) == 1
    assert lines[0].startswith(f"tlmscore: error: {said}")
    assert not (tmp_path / "s.json").exists()


def test_a_source_that_is_not_a_live_store_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["watch", str(tmp_path / "calls.jsonl"), "--state", str(tmp_path / "s.json"), "--offline"])
    assert code == EXIT_USAGE
    assert "watch reads phoenix://HOST:PORT/PROJECT or mlflow://HOST:PORT/EXPERIMENT" in capsys.readouterr().err


def test_a_judge_cap_without_a_price_is_refused_before_work(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["watch", "phoenix://127.0.0.1:9/p", "--state", str(tmp_path / "s.json"), "--scorer", "judge",
                 "--model", "some-local-model", "--base-url", "http://127.0.0.1:9/v1", "--max-cost-per-hour", "1"])
    assert code == EXIT_USAGE
    assert "no price is known" in capsys.readouterr().err


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_status_line_is_redrawn_on_a_terminal_and_printed_every_so_often_elsewhere() -> None:
    counts = Counts(seen=12, scored=5, sampled_out=4, cost_today=0.5, lag=1.25)
    counts.skip("where", 2)
    counts.skip("already scored")
    assert counts.line() == ("watch: seen 12 · scored 5 · sampled out 4 · skipped 3 (already scored 1, where 2) · "
                             "cost today $0.50 · lag 1.2 s")
    tty = Tty()
    StatusLine(tty).show(counts)
    assert tty.getvalue() == "\r\x1b[2K" + counts.line()
    clock = iter([0.0, 10.0, 61.0])
    plain = io.StringIO()
    line = StatusLine(plain, every=60, now=lambda: next(clock))
    for _ in range(3):
        line.show(counts)
    assert plain.getvalue() == (counts.line() + "\n") * 2
    assert Counts.of(counts.to_json()) == Counts(12, 5, 0, 4, {"where": 2, "already scored": 1})
