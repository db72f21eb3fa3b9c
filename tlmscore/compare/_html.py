"""The comparison as one self-contained HTML page: verdict, gates, figures, two plots, the dropped rows.

No script, no external file: it opens offline and can be attached to a CI run as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from tlmscore.compare._diff import Comparison
from tlmscore.compare._gates import GateResult
from tlmscore.compare._numbers import figure, summary_figures
from tlmscore.compare._svg import distributions_svg, scatter_svg

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
.fail { color: #b00020; font-weight: bold; } .pass { color: #1b7f3b; }
.plots { display: flex; gap: 2em; flex-wrap: wrap; }
"""


def _gates(results: Sequence[GateResult]) -> str:
    if not results:
        return "<p>No gates given.</p>"
    rows = "".join(f'<tr><td>{escape(r.name)}</td><td class="{"pass" if r.ok else "fail"}">'
                   f'{"pass" if r.ok else "fail"}</td><td>{escape(r.reason)}</td></tr>' for r in results)
    return f"<table><tr><th>gate</th><th>result</th><th>why</th></tr>{rows}</table>"


def _summary(comparison: Comparison) -> str:
    items = summary_figures(comparison, comparison.key)
    return "<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in items) + "</table>"


def _dropped(comparison: Comparison) -> str:
    dropped = comparison.dropped()
    if not dropped:
        return "<p>No row dropped.</p>"
    rows = "".join(f"<tr><td>{escape(r.key)}</td><td>{figure(r.base)}</td><td>{figure(r.new)}</td>"
                   f"<td>{figure(r.delta, signed=True)}</td><td>{escape(r.explanation or '')}</td></tr>"
                   for r in dropped)
    return ("<table><tr><th>id</th><th>base</th><th>new</th><th>change</th><th>new explanation</th></tr>"
            f"{rows}</table>")


def _groups(comparison: Comparison) -> str:
    if not comparison.groups:
        return ""
    rows = "".join(f"<tr><td>{escape(name)}</td><td>{s.rows}</td><td>{figure(s.base_mean)}</td>"
                   f"<td>{figure(s.new_mean)}</td><td>{figure(s.mean_delta.mean, signed=True)}</td>"
                   f"<td>{s.dropped}</td></tr>"
                   for name, s in comparison.groups.items())
    return (f"<h2>By {escape(comparison.by or '')}</h2><table><tr><th>group</th><th>rows</th><th>base mean</th>"
            f"<th>new mean</th><th>difference</th><th>dropped</th></tr>{rows}</table>")


def render_html(comparison: Comparison, results: Sequence[GateResult], names: tuple[str, str]) -> str:
    """The page as text."""
    failed = [r.name for r in results if not r.ok]
    verdict = (f'<p class="fail">gate failed: {escape(", ".join(failed))}</p>' if failed
               else '<p class="pass">all gates hold</p>' if results else "<p>No gates given.</p>")
    paired = [r for r in comparison.rows if r.base_scored and r.new_scored]
    title = f"tlmscore compare: {names[0]} → {names[1]}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title><style>{_STYLE}</style></head>
<body>
<h1>{escape(title)}</h1>
{verdict}
{_gates(results)}
{_summary(comparison)}
<div class="plots">
{distributions_svg([r.base for r in paired], [r.new for r in paired])}
{scatter_svg(comparison.rows, comparison.threshold)}
</div>
<h2>Dropped rows</h2>
{_dropped(comparison)}
{_groups(comparison)}
</body></html>
"""
