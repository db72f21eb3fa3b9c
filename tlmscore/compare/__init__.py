"""Compare two scored runs and gate on the difference: what `tlmscore compare BASE NEW` runs.

    base = list(read_rows("base.jsonl"))               # tlmscore.output.read_rows
    new = list(read_rows("new.jsonl"))
    comparison = compare_rows(base, new, key="id", threshold=0.5, by="model")
    results = check_gates(comparison, Gates(max_drop=0.05))
    Path("report.md").write_text(render_report(".md", comparison, Gates(max_drop=0.05), results, ("base", "new")))

- `_diff`: the join on a key, rows that moved, per-group figures (pure).
- `_stats`: the mean difference with a seeded paired bootstrap interval.
- `_gates`: `--max-drop`, `--fail-under`, `--max-flagged-rate`, `--min-delta`; no data is not a pass.
- `_numbers`: how a figure is written, and the figures every report shows.
- `_report`, `_markdown`, `_html`, `_svg`: Markdown, JUnit XML, JSON and an offline HTML page with two plots.
"""

from __future__ import annotations

from tlmscore.compare._diff import Comparison, RowChange, Summary, compare_rows
from tlmscore.compare._gates import GateResult, Gates, check_gates
from tlmscore.compare._report import REPORT_SUFFIXES, as_json, render_report, report_kind
from tlmscore.compare._stats import Interval, paired_bootstrap

__all__ = [
    "REPORT_SUFFIXES",
    "Comparison",
    "GateResult",
    "Gates",
    "Interval",
    "RowChange",
    "Summary",
    "as_json",
    "check_gates",
    "compare_rows",
    "paired_bootstrap",
    "render_report",
    "report_kind",
]
