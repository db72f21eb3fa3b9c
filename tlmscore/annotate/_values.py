"""Scored rows → annotations (pure): what every trace store is told about one row.

A row is `supported` when its score is at or above the threshold, `unsupported` below it, and
`not scorable` when it has an error or no score; the explanation then says why (the error, else
the scorer's explanation, e.g. "no evidence to check …"). Rows are read-only mappings of their
columns (a `tlmscore.Row` or a dict read from a scored file).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from tlmscore.stores import Annotation

SUPPORTED = "supported"
UNSUPPORTED = "unsupported"
NOT_SCORABLE = "not scorable"
SIDE_COLUMNS = ("id", "source", "line", "scorer", "score", "explanation", "error", "response_id", "origin",
                "trace_id", "span_id")
"""The columns a side file of failed annotations keeps, with the `target` each row failed at: enough to
annotate again (and to read it back as rows), no prompt or response."""


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _text(value: Any) -> str | None:
    """A cell as text; None when absent (null, NaN, blank)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    return text or None


def annotation_of(row: Mapping[str, Any], threshold: float = 0.5) -> Annotation:
    """The annotation of one scored row."""
    score = _score(row.get("score"))
    error = _text(row.get("error"))
    explanation = str(row.get("explanation") or "") if _text(row.get("explanation")) else ""
    if error is not None or score is None:
        label, explanation, score = NOT_SCORABLE, error or explanation or "no score", None
    else:
        label = SUPPORTED if score >= threshold else UNSUPPORTED
    return Annotation(
        row_id=str(row.get("id")), name=f"tlmscore.{row.get('scorer') or 'score'}", score=score, label=label,
        explanation=explanation, response_id=_text(row.get("response_id")),
        trace_id=_text(row.get("trace_id")), span_id=_text(row.get("span_id")))


def annotations_of(rows: Iterable[Mapping[str, Any]], threshold: float = 0.5) -> list[Annotation]:
    """The annotations of scored rows, in order."""
    return [annotation_of(row, threshold) for row in rows]


def side_row(row: Mapping[str, Any], target: str | None = None) -> dict[str, Any]:
    """The part of a row a side file keeps (NaN scores as null), and the target it failed at."""
    kept = {k: row.get(k) for k in SIDE_COLUMNS if k in row}
    kept["score"] = _score(row.get("score"))
    if target is not None:
        kept["target"] = target
    elif row.get("target"):
        kept["target"] = row["target"]
    return kept
