"""Rows whose score only became NaN (no error) are counted and listed as newly unscored, not as new errors: in
the library, the reports and the command's line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.support.tables import json_lines
from tlmscore.cli import main
from tlmscore.compare import Gates, compare_rows, render_report
from tlmscore.output import read_rows


def two_runs(scored: Path) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    base = [dict(r) for r in read_rows(scored)]
    new = [dict(r) for r in base]
    for row in new[:3]:  # the scorer found nothing to score: NaN, no error
        row |= {"score": math.nan, "error": None, "explanation": "no evidence to check the answer against"}
    new[3] |= {"score": math.nan, "error": "scoring failed: judge endpoint returned HTTP 500"}
    new[4] |= {"score": math.nan, "error": ""}  # an empty error is no error
    return base, new


def test_an_unscored_row_is_not_a_new_error(labelled_scores: Path) -> None:
    base, new = two_runs(labelled_scores)
    comparison = compare_rows(base, new)
    assert [r.key for r in comparison.new_errors()] == [base[3]["id"]]
    assert [r.key for r in comparison.newly_unscored()] == [base[i]["id"] for i in (0, 1, 2, 4)]
    assert (comparison.summary.new_errors, comparison.summary.newly_unscored) == (1, 4)
    markdown = render_report(".md", comparison, Gates(), [], ("base", "new"))
    assert "| new errors / newly unscored / fixed | 1 / 4 / 0 |" in markdown
    assert "### Newly unscored (no score now, no error)" in markdown and "### New errors" in markdown
    assert "1 / 4 / 0" in render_report(".html", comparison, Gates(), [], ("base", "new"))
    report = json.loads(render_report(".json", comparison, Gates(), [], ("base", "new")))
    assert (report["summary"]["new_errors"], report["summary"]["newly_unscored"]) == (1, 4)


def test_the_command_says_new_errors_and_newly_unscored_apart(labelled_scores: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    base, new = two_runs(labelled_scores)
    assert len(json_lines(labelled_scores)) == len(base)
    new_file = tmp_path / "new.jsonl"
    new_file.write_text("".join(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                                            for k, v in r.items()}) + "\n" for r in new), encoding="utf-8")
    assert main(["compare", str(labelled_scores), str(new_file)]) == 0
    err = capsys.readouterr().err
    assert "1 new errors, 4 newly unscored, 0 fixed" in err
