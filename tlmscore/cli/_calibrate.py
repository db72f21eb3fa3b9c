"""`tlmscore calibrate`: labelled scores from a scored file, a calibration fitted on them, its reliability table.

`labelled_scores` reads a file written by `tlmscore score` (JSONL, CSV or Parquet) and the labels,
either a column of that file or of another table joined on `id` (a transcript file's `metadata`
counts as columns, so labels kept with the transcripts need no copying). `run_calibrate` fits and
cross-validates a `Calibration` from them and saves it (`tlmscore.run` adds the `calibrated_score` column).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tlmscore._tables import KINDS, rows, table_kind
from tlmscore.errors import ConfigError
from tlmscore.output import read_rows
from tlmscore.scoring.calibration import cross_validate, fit, save


@dataclass(frozen=True)
class LabelledScores:
    """Raw scores with 0/1 labels, the scorer they came from, and how many rows were left out (no score/label)."""

    scorer: str
    scores: tuple[float, ...]
    labels: tuple[int, ...]
    skipped: int


def _label_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a label table (JSONL, JSON, CSV or Parquet: a scored output, a transcript file, any table)."""
    kind = table_kind(path)
    if not path.is_file() or kind not in KINDS:
        raise ConfigError(f"{path}: expected a .jsonl, .json, .csv or .parquet file")
    try:
        return [cells for _, cells in rows(path, kind) if isinstance(cells, dict)]
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def _label_of(row: Mapping[str, Any], column: str) -> Any:
    if column in row:
        return row[column]
    metadata = row.get("metadata")
    return metadata.get(column) if isinstance(metadata, Mapping) else None


def _binary(value: Any, positive: Sequence[str] | None, column: str) -> int | None:
    """A label as 0/1 (None when missing): booleans and 0/1 as they are, other values by `positive`."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if positive:
        return int(str(value) in positive)
    if isinstance(value, bool) or value in (0, 1):
        return int(value)
    lowered = str(value).strip().lower()
    if lowered in ("true", "false"):
        return int(lowered == "true")
    raise ConfigError(f"label column {column!r} holds {value!r}: give --positive VALUE for labels that are "
                      "not true/false or 0/1")


def labelled_scores(scored: Path, column: str, *, labels_from: Path | None = None,
                    positive: Sequence[str] | None = None) -> LabelledScores:
    """The scores of `scored` with their labels (from `column` of `scored`, or of `labels_from` by `id`)."""
    scored_rows = list(read_rows(scored))
    scorers = {r.scorer for r in scored_rows if r.scorer is not None}
    if not scored_rows or len(scorers) != 1:
        raise ConfigError(f"{scored}: expected the rows of one scorer (a `tlmscore score` output), "
                          f"found scorers {sorted(scorers) or 'none'}")
    by_id = {str(r.get("id")): _label_of(r, column) for r in _label_rows(labels_from)} if labels_from else None
    if by_id is None and not any(column in r for r in scored_rows):
        raise ConfigError(f"{scored}: no column {column!r} (join labels from another file with --labels-from)")
    scores, labels = [], []
    for row in scored_rows:
        raw = by_id.get(row.id) if by_id is not None else _label_of(row, column)
        label = _binary(raw, positive, column)
        if label is None or math.isnan(row.score):
            continue
        scores.append(row.score)
        labels.append(label)
    return LabelledScores(scorers.pop(), tuple(scores), tuple(labels), len(scored_rows) - len(scores))


def run_calibrate(args: argparse.Namespace) -> int:
    """Fit, cross-validate and save a calibration; the reliability table goes to stdout."""
    data = labelled_scores(args.scored, args.labels, labels_from=args.labels_from, positive=args.positive)
    calibration = fit(data.scores, data.labels, scorer=data.scorer, method=args.method)
    check = cross_validate(data.scores, data.labels, method=args.method, folds=args.folds).as_dict()
    calibration = replace(calibration, validation={**check, "skipped_rows": data.skipped})
    save(calibration, args.output)
    print(f"{'held-out bin':<12}  {'raw: rows':>9}  {'p':>4}  {'correct':>7}  {'calibrated: rows':>16}  {'p':>4}  "
          f"{'correct':>7}")
    for raw, cal in zip(check["bins_raw"], check["bins_calibrated"], strict=True):
        span = f"[{raw['low']:.1f}, {raw['high']:.1f})"
        print(f"{span:<12}  {raw['count']:>9}  {_fmt(raw['mean_probability'])}  "
              f"{_fmt(raw['accuracy']):>7}  {cal['count']:>16}  {_fmt(cal['mean_probability'])}  "
              f"{_fmt(cal['accuracy']):>7}")
    print(f"tlmscore: {args.method} calibration of {data.scorer} on {calibration.rows} rows "
          f"({calibration.positives} correct, {data.skipped} without score or label): expected calibration error "
          f"on held-out folds {check['ece_raw']:.3f} raw, {check['ece_calibrated']:.3f} calibrated "
          f"({check['folds']} folds); saved {args.output}", file=sys.stderr)
    return 0


def _fmt(value: float | None) -> str:
    return "   -" if value is None else f"{value:4.2f}"
