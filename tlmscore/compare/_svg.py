"""The report's two plots as inline SVG: score distributions overlaid, and base against new per row.

Drawn here (no plotting library, no script), so the page stays small and opens offline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from tlmscore.compare._diff import RowChange

BASE_COLOUR = "#1f77b4"
NEW_COLOUR = "#ff7f0e"
DROPPED_COLOUR = "#d62728"
ROSE_COLOUR = "#2ca02c"
SAME_COLOUR = "#7f7f7f"
SIZE = 360
MARGIN = 44
BINS = 20
MAX_POINTS = 5000
"""Scatter points drawn at most: every row that moved, then an even sample of the rest (keeps the page small)."""


def _px(value: float) -> float:
    """A value in [0, 1] as the x pixel of the plot area."""
    return MARGIN + value * (SIZE - 2 * MARGIN)


def _py(value: float) -> float:
    """A value in [0, 1] as the y pixel of the plot area (up is larger)."""
    return SIZE - MARGIN - value * (SIZE - 2 * MARGIN)


def _frame(title: str, x_label: str, y_label: str, y_max: float) -> list[str]:
    """Axes from 0 to 1 (x) and 0 to `y_max` (y), with ticks, labels and a title."""
    parts = [f'<rect x="0" y="0" width="{SIZE}" height="{SIZE}" fill="white"/>',
             f'<text x="{SIZE / 2}" y="18" text-anchor="middle" font-size="14">{escape(title)}</text>',
             f'<line x1="{_px(0)}" y1="{_py(0)}" x2="{_px(1)}" y2="{_py(0)}" stroke="black"/>',
             f'<line x1="{_px(0)}" y1="{_py(0)}" x2="{_px(0)}" y2="{_py(1)}" stroke="black"/>',
             f'<text x="{SIZE / 2}" y="{SIZE - 8}" text-anchor="middle" font-size="12">{escape(x_label)}</text>',
             f'<text x="12" y="{SIZE / 2}" text-anchor="middle" font-size="12" '
             f'transform="rotate(-90 12 {SIZE / 2})">{escape(y_label)}</text>']
    for step in range(6):
        tick = step / 5
        parts.append(f'<text x="{_px(tick)}" y="{_py(0) + 14}" text-anchor="middle" font-size="10">{tick:.1f}</text>')
        label = f"{tick * y_max:.0f}" if y_max != 1 else f"{tick:.1f}"
        parts.append(f'<text x="{_px(0) - 4}" y="{_py(tick) + 3}" text-anchor="end" font-size="10">{label}</text>')
    return parts


def _counts(scores: Sequence[float]) -> list[int]:
    counts = [0] * BINS
    for score in scores:
        if not math.isnan(score):
            counts[min(BINS - 1, max(0, int(score * BINS)))] += 1
    return counts


def distributions_svg(base: Sequence[float], new: Sequence[float]) -> str:
    """Histograms of the base and new scores over [0, 1], overlaid (20 bins, half transparent)."""
    base_counts, new_counts = _counts(base), _counts(new)
    top = max([*base_counts, *new_counts, 1])
    y_max = float(math.ceil(top / 5) * 5)
    parts = _frame("Score distributions", "score", "rows", y_max)
    width = (SIZE - 2 * MARGIN) / BINS
    for counts, colour, name in ((base_counts, BASE_COLOUR, "base"), (new_counts, NEW_COLOUR, "new")):
        for index, count in enumerate(counts):
            if count:
                height = count / y_max * (SIZE - 2 * MARGIN)
                parts.append(f'<rect class="{name}" x="{_px(index / BINS):.2f}" y="{_py(0) - height:.2f}" '
                             f'width="{width:.2f}" height="{height:.2f}" fill="{colour}" fill-opacity="0.5"/>')
    parts += _legend([(BASE_COLOUR, "base"), (NEW_COLOUR, "new")])
    return _svg("distributions", parts)


def scatter_svg(rows: Sequence[RowChange], threshold: float) -> str:
    """Base score (x) against new score (y) per row scored on both sides; the diagonal is "unchanged"."""
    paired = [r for r in rows if not math.isnan(r.delta)]
    shown = _points(paired)
    title = "Base vs new, per row" + (f" ({len(shown)} of {len(paired)})" if len(shown) < len(paired) else "")
    parts = _frame(title, "base score", "new score", 1.0)
    parts.append(f'<line x1="{_px(0)}" y1="{_py(0)}" x2="{_px(1)}" y2="{_py(1)}" stroke="#bbbbbb" '
                 'stroke-dasharray="4 3"/>')
    parts.append(f'<line x1="{_px(0)}" y1="{_py(threshold)}" x2="{_px(1)}" y2="{_py(threshold)}" stroke="#dddddd"/>')
    for row in shown:
        colour = DROPPED_COLOUR if row.delta < 0 else ROSE_COLOUR if row.delta > 0 else SAME_COLOUR
        parts.append(f'<circle cx="{_px(row.base):.2f}" cy="{_py(row.new):.2f}" r="5" fill="{colour}">'
                     f'<title>{escape(row.key)}: {row.base:.3f} → {row.new:.3f}</title></circle>')
    parts += _legend([(DROPPED_COLOUR, "dropped"), (ROSE_COLOUR, "rose"), (SAME_COLOUR, "unchanged")])
    return _svg("scatter", parts)


def _points(rows: Sequence[RowChange]) -> list[RowChange]:
    """The rows the scatter draws: all of them up to `MAX_POINTS`, else the moved ones and a sample of the rest."""
    if len(rows) <= MAX_POINTS:
        return list(rows)
    moved = [r for r in rows if r.delta != 0][:MAX_POINTS]
    same = [r for r in rows if r.delta == 0]
    room = MAX_POINTS - len(moved)
    step = max(1, math.ceil(len(same) / room)) if room > 0 else 0
    return moved + (same[::step][:room] if step else [])


def _legend(entries: Sequence[tuple[str, str]]) -> list[str]:
    parts = []
    for index, (colour, label) in enumerate(entries):
        y = 30 + 16 * index
        parts.append(f'<rect x="{SIZE - 120}" y="{y}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{SIZE - 104}" y="{y + 9}" font-size="11">{escape(label)}</text>')
    return parts


def _svg(name: str, parts: Sequence[str]) -> str:
    body = "\n  ".join(parts)
    return (f'<svg id="{name}" xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE}" '
            f'viewBox="0 0 {SIZE} {SIZE}" role="img">\n  {body}\n</svg>')
