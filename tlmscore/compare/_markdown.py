"""The comparison as Markdown, ready for `$GITHUB_STEP_SUMMARY`: verdict, gates, figures, the rows that moved."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tlmscore.compare._diff import Comparison, RowChange, Summary
from tlmscore.compare._gates import GateResult
from tlmscore.compare._numbers import figure, percent, summary_figures

ROW_LIMIT = 100
"""Rows listed per table; the rest are counted. Rows a gate failed are always listed."""
CELL_LIMIT = 300
"""Characters of an explanation shown in a table cell."""


def render_markdown(comparison: Comparison, results: Sequence[GateResult], names: tuple[str, str]) -> str:
    """The whole report as one Markdown document."""
    failed = [r for r in results if not r.ok]
    verdict = ("❌ **gate failed**: " + ", ".join(r.name for r in failed)) if failed else (
        "✅ **all gates hold**" if results else "no gates given")
    lines = [f"## tlmscore compare: `{_cell(names[0])}` → `{_cell(names[1])}`", "", verdict, ""]
    if results:
        lines += ["| gate | result | why |", "|---|---|---|"]
        lines += [f"| `{r.name}` | {'pass' if r.ok else '**fail**'} | {_cell(r.reason)} |" for r in results]
        lines.append("")
    lines += _summary_table(comparison)
    gated = {k for r in results for k in r.keys}
    lines += _rows("Dropped", comparison.dropped(), gated)
    lines += _rows("New errors", comparison.new_errors(), gated)
    lines += _rows("Newly unscored (no score now, no error)", comparison.newly_unscored(), gated)
    lines += _rows(f"Crossed the threshold ({comparison.threshold:g}) downwards", comparison.newly_flagged(), gated)
    lines += _rows(f"Crossed the threshold ({comparison.threshold:g}) upwards", comparison.newly_passing(), set())
    lines += _rows("Fixed (scored now, not before)", comparison.fixed_errors(), set())
    lines += _rows("Rose", comparison.rose(), set())
    lines += _one_side("Only in the base run", comparison.only_base)
    lines += _one_side("Only in the new run", comparison.only_new)
    if comparison.groups:
        lines += [f"### By `{comparison.by}`", "", "| group | rows | base mean | new mean | difference [CI] | "
                  "dropped | below threshold (new) |", "|---|---|---|---|---|---|---|"]
        lines += [_group_line(name, s) for name, s in comparison.groups.items()]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _summary_table(comparison: Comparison) -> list[str]:
    items = summary_figures(comparison, f"`{comparison.key}`", ", paired bootstrap")
    items.insert(-1, ("below threshold in the new run", percent(comparison.summary.new_flagged_rate)))
    return ["| | |", "|---|---|", *(f"| {what} | {value} |" for what, value in items), ""]


def _rows(title: str, rows: Sequence[RowChange], gated: set[str]) -> list[str]:
    if not rows:
        return []
    shown = [r for r in rows if r.key in gated] + [r for r in rows if r.key not in gated]
    shown = shown[:max(ROW_LIMIT, sum(r.key in gated for r in rows))]
    lines = [f"### {title} ({len(rows)})", "", "| id | base | new | change | new explanation |",
             "|---|---|---|---|---|"]
    lines += [f"| `{_cell(r.key)}` | {_score(r.base, r.base_error)} | {_score(r.new, r.new_error)} | "
              f"{figure(r.delta, signed=True)} | {_cell(r.new_error or r.explanation or '')} |" for r in shown]
    if len(rows) > len(shown):
        lines.append(f"\n… and {len(rows) - len(shown)} more (the JSON report lists every row)")
    return [*lines, ""]


def _one_side(title: str, keys: Iterable[str]) -> list[str]:
    keys = list(keys)
    if not keys:
        return []
    listed = ", ".join(f"`{_cell(k)}`" for k in keys[:ROW_LIMIT])
    more = f" … and {len(keys) - ROW_LIMIT} more" if len(keys) > ROW_LIMIT else ""
    return [f"### {title} ({len(keys)})", "", listed + more, ""]


def _group_line(name: str, s: Summary) -> str:
    ci = s.mean_delta
    return (f"| {_cell(name)} | {s.rows} | {figure(s.base_mean)} | {figure(s.new_mean)} | "
            f"{figure(ci.mean, signed=True)} [{figure(ci.low, signed=True)}, {figure(ci.high, signed=True)}] | "
            f"{s.dropped} | {percent(s.new_flagged_rate)} |")


def _score(value: float, error: str | None) -> str:
    return "error" if error is not None else figure(value)


def _cell(text: str) -> str:
    """Text safe inside a table cell: one line, pipes and backticks escaped, long text cut."""
    flat = " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")
    return flat if len(flat) <= CELL_LIMIT else flat[:CELL_LIMIT - 1] + "…"
