"""Scored rows → annotations (pure): what every trace store is told about one row.

A row is `supported` when its score is at or above the threshold, `unsupported` below it, and
`not scorable` when it has an error or no score (the explanation then says why).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SUPPORTED = "supported"
UNSUPPORTED = "unsupported"
NOT_SCORABLE = "not scorable"
_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
_SPAN_ID = re.compile(r"^[0-9a-f]{16}$")
SIDE_COLUMNS = ("id", "source", "line", "scorer", "score", "explanation", "error", "response_id", "origin", "trace_id",
                "span_id")
"""The columns a side file of failed annotations keeps: enough to annotate again (and to read it back as rows),
no prompt or response."""


@dataclass(frozen=True)
class Annotation:
    """One row's evaluation, as it is written back."""

    row_id: str
    name: str
    score: float | None
    label: str
    explanation: str
    response_id: str | None = None
    trace_id: str | None = None
    span_id: str | None = None


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _id(value: Any, pattern: re.Pattern[str]) -> str | None:
    """A trace or span id as lower-case hex, None when absent or not an OpenTelemetry id."""
    if value is None:
        return None
    text = str(value).strip().lower().removeprefix("0x").replace("-", "")
    return text if pattern.match(text) and set(text) != {"0"} else None


def annotation_of(row: dict[str, Any], threshold: float = 0.5) -> Annotation:
    """The annotation of one scored row."""
    score = _score(row.get("score"))
    error = row.get("error")
    error = None if error is None or (isinstance(error, float) and math.isnan(error)) else str(error)
    if error is not None or score is None:
        label, explanation = NOT_SCORABLE, error or "no score"
        score = None
    else:
        label = SUPPORTED if score >= threshold else UNSUPPORTED
        explanation = str(row.get("explanation") or "")
    response_id = row.get("response_id")
    return Annotation(
        row_id=str(row.get("id")), name=f"tlmscore.{row.get('scorer') or 'score'}", score=score, label=label,
        explanation=explanation, response_id=None if response_id is None else str(response_id),
        trace_id=_id(row.get("trace_id"), _TRACE_ID), span_id=_id(row.get("span_id"), _SPAN_ID))


def annotations_of(rows: Iterable[dict[str, Any]], threshold: float = 0.5) -> list[Annotation]:
    """The annotations of scored rows, in order."""
    return [annotation_of(row, threshold) for row in rows]


def side_row(row: dict[str, Any]) -> dict[str, Any]:
    """The part of a row a side file keeps (NaN scores as null)."""
    kept = {k: row.get(k) for k in SIDE_COLUMNS if k in row}
    kept["score"] = _score(row.get("score"))
    return kept
