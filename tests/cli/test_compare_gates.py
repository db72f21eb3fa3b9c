"""`tlmscore compare` with `--fail-under`, `--max-flagged-rate` and `--min-delta`: exit 0 at the limit, 1 past it."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from tlmscore.cli import main
from tlmscore.compare import paired_bootstrap


def _write(path: Path, scores: Sequence[float]) -> Path:
    rows = [{"source": "logs.jsonl", "line": i + 1, "id": f"r{i}", "score": s, "error": None}
            for i, s in enumerate(scores)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _runs(tmp_path: Path, base: Sequence[float], new: Sequence[float]) -> tuple[str, str]:
    return str(_write(tmp_path / "base.jsonl", base)), str(_write(tmp_path / "new.jsonl", new))


def _gate_line(err: str, name: str) -> str:
    return next(line for line in err.splitlines() if line.startswith(f"tlmscore: gate {name}: "))


def test_fail_under_exits_0_at_the_new_mean_and_1_above_it(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    base, new = _runs(tmp_path, [0.875, 0.875], [0.5, 0.75])  # new mean 0.625; the base's 0.875 is not read
    assert main(["compare", base, new, "--fail-under", "0.625"]) == 0
    assert _gate_line(capsys.readouterr().err, "fail-under") == (
        "tlmscore: gate fail-under: pass: new mean 0.625 ≥ 0.625 over 2 rows scored on both sides")
    assert main(["compare", base, new, "--fail-under", "0.626"]) == 1
    assert "gate fail-under: FAIL: new mean 0.625 < 0.626" in capsys.readouterr().err


def test_max_flagged_rate_exits_0_at_the_rate_and_1_below_it(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    base, new = _runs(tmp_path, [0.0] * 4, [0.25, 0.5, 0.75, 0.625])  # one of four below 0.5; 0.5 is not
    assert main(["compare", base, new, "--max-flagged-rate", "0.25"]) == 0
    assert main(["compare", base, new, "--max-flagged-rate", "0.24"]) == 1
    assert "gate max-flagged-rate: FAIL: 25.0% of the new run's scored rows are below 0.5 (> 24.0%)" in (
        capsys.readouterr().err)
    # --threshold 0.625: 0.25 and 0.5 are below it, 0.625 is not
    assert main(["compare", base, new, "--threshold", "0.625", "--max-flagged-rate", "0.5"]) == 0
    assert main(["compare", base, new, "--threshold", "0.625", "--max-flagged-rate", "0.49"]) == 1


def test_min_delta_exits_0_at_the_intervals_upper_end_and_1_above_it(tmp_path: Path) -> None:
    base_scores = [0.25, 0.5, 0.5, 0.25, 0.75, 0.5, 0.875, 0.125]
    new_scores = [0.5, 0.5, 0.25, 0.75, 0.625, 0.875, 0.5, 0.375]
    base, new = _runs(tmp_path, base_scores, new_scores)
    high = paired_bootstrap([n - b for b, n in zip(base_scores, new_scores, strict=True)], seed=3,
                            resamples=500).high
    flags = ["--seed", "3", "--resamples", "500", "--min-delta"]
    assert main(["compare", base, new, *flags, repr(high)]) == 0
    assert main(["compare", base, new, *flags, repr(math.nextafter(high, math.inf))]) == 1
    assert main(["compare", base, new, *flags, "0"]) == 0  # the interval straddles 0: not lower with confidence


def test_every_gate_given_is_printed_and_one_failure_is_exit_1(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    base, new = _runs(tmp_path, [0.5] * 4, [0.75] * 4)
    assert main(["compare", base, new, "--max-drop", "0", "--fail-under", "0.75", "--max-flagged-rate", "0",
                 "--min-delta", "0.25"]) == 0
    err = capsys.readouterr().err
    assert [line.split(":")[1] for line in err.splitlines() if line.startswith("tlmscore: gate ")] == [
        " gate max-drop", " gate fail-under", " gate max-flagged-rate", " gate min-delta"]
    assert main(["compare", base, new, "--max-drop", "0", "--fail-under", "0.75", "--max-flagged-rate", "0",
                 "--min-delta", "0.26"]) == 1
    assert "gate min-delta: FAIL" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value"), [("--fail-under", "1.5"), ("--max-flagged-rate", "-0.1"),
                                             ("--min-delta", "-2")])
def test_a_gate_limit_out_of_range_is_a_usage_error(tmp_path: Path, flag: str, value: str) -> None:
    base, new = _runs(tmp_path, [0.5], [0.5])
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", base, new, flag, value])
    assert exit_info.value.code == 2


def test_no_gate_given_is_exit_0_however_the_scores_moved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = _runs(tmp_path, [1.0] * 3, [0.0] * 3)
    assert main(["compare", base, new]) == 0
    err = capsys.readouterr().err
    assert "3 dropped" in err and "tlmscore: gate " not in err
