"""Calibration: a monotone map from a scorer's raw score to the probability that the answer is correct.

Raw scores rank answers, but a `grounding` score of 0.7 need not mean that 70% of such answers are
right. `fit` learns a non-decreasing map from labelled rows, by isotonic regression (pool adjacent
violators, interpolated linearly between the fitted steps) or by Platt scaling (a logistic curve
`1 / (1 + exp(-(a * score + b)))`, fitted by Newton's method); both are a few lines of numpy, so
no machine-learning library is needed. `cross_validate` measures what the map is worth on rows it
did not see: the expected calibration error (ECE) of the raw and the calibrated scores on held-out
folds, with their reliability bins.

A `Calibration` records the scorer it was fitted for; `apply` refuses scores of another scorer.
Scores that are NaN (rows a scorer could not score) stay NaN.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tlmscore._tables import plain
from tlmscore.errors import ConfigError
from tlmscore.model import ScoringInput
from tlmscore.scoring.base import Score, Scorer

__all__ = [
    "Calibrated",
    "Calibration",
    "CrossValidation",
    "ReliabilityBin",
    "apply",
    "cross_validate",
    "expected_calibration_error",
    "fit",
    "load",
    "reliability",
    "save",
]

Method = Literal["isotonic", "platt"]
Floats = npt.NDArray[np.float64]
FORMAT = "tlmscore-calibration/1"
_NEWTON_STEPS = 100
_CONVERGED = 1e-10
_MIN_ROWS = 2


@dataclass(frozen=True)
class Calibration:
    """A fitted map. Isotonic: `x` and `y` are the knots; Platt: `a` and `b` are the curve's parameters."""

    scorer: str
    method: Method
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    a: float = 0.0
    b: float = 0.0
    rows: int = 0
    positives: int = 0
    validation: dict[str, Any] = field(default_factory=dict)

    def __call__(self, scores: Sequence[float] | Floats) -> Floats:
        """The calibrated probabilities of raw `scores` (NaN stays NaN)."""
        raw = np.asarray(scores, dtype=np.float64)
        if self.method == "platt":
            out: Floats = 1.0 / (1.0 + np.exp(-(self.a * raw + self.b)))
        else:
            out = np.interp(raw, np.asarray(self.x), np.asarray(self.y))
        return np.where(np.isnan(raw), np.nan, out)


@dataclass(frozen=True)
class ReliabilityBin:
    """Rows whose probability falls in [low, high): how many, their mean probability and accuracy."""

    low: float
    high: float
    count: int
    mean_probability: float
    accuracy: float


@dataclass(frozen=True)
class CrossValidation:
    """ECE of raw and calibrated scores over held-out folds, and the bins it was computed from."""

    folds: int
    ece_raw: float
    ece_calibrated: float
    bins_raw: tuple[ReliabilityBin, ...]
    bins_calibrated: tuple[ReliabilityBin, ...]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able summary (stored in the calibration file); empty bins' means are None."""
        found: dict[str, Any] = plain(asdict(self))
        return found


def _clean(scores: Sequence[float] | Floats, labels: Sequence[Any] | npt.NDArray[Any]) -> tuple[Floats, Floats]:
    """Scores and 0/1 labels as arrays, without rows whose score is NaN."""
    x = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ConfigError(f"calibration needs one label per score (got {x.shape} scores, {y.shape} labels)")
    keep = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[keep], y[keep]
    if not np.isin(y, (0.0, 1.0)).all():
        raise ConfigError("calibration labels must be 0/1 or true/false")
    return x, y


def _isotonic(x: Floats, y: Floats) -> tuple[Floats, Floats]:
    """Pool adjacent violators over the distinct scores (ties pooled first).

    Knots are each block's lowest and highest score at the block's mean label, so the map is flat
    across a block and linear only between blocks.
    """
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    label_sums = np.bincount(inverse, weights=y)
    blocks: list[list[float]] = []  # [sum of labels, rows, lowest score, highest score]
    for value, total, count in zip(values.tolist(), label_sums.tolist(), counts.tolist(), strict=True):
        blocks.append([total, float(count), value, value])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            last = blocks.pop()
            blocks[-1] = [blocks[-1][0] + last[0], blocks[-1][1] + last[1], blocks[-1][2], last[3]]
    knots_x: list[float] = []
    knots_y: list[float] = []
    for total, count, low, high in blocks:
        for edge in dict.fromkeys((low, high)):  # one knot for a block of one score
            knots_x.append(edge)
            knots_y.append(total / count)
    return np.asarray(knots_x), np.asarray(knots_y)


def _platt(x: Floats, y: Floats) -> tuple[float, float]:
    """Logistic regression of the label on the score, with Platt's smoothed targets, by Newton's method."""
    positives = float(y.sum())
    negatives = float(len(y)) - positives
    target = np.where(y == 1.0, (positives + 1) / (positives + 2), 1 / (negatives + 2))
    a, b = 0.0, 0.0
    for _ in range(_NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(a * x + b)))
        weight = np.maximum(p * (1 - p), 1e-12)
        gradient = np.array([np.sum((p - target) * x), np.sum(p - target)])
        hessian = np.array([[np.sum(weight * x * x), np.sum(weight * x)], [np.sum(weight * x), np.sum(weight)]])
        step = np.linalg.solve(hessian + 1e-9 * np.eye(2), gradient)
        a, b = a - float(step[0]), b - float(step[1])
        if float(np.abs(step).max()) < _CONVERGED:
            break
    return a, b


def fit(scores: Sequence[float] | Floats, labels: Sequence[Any] | npt.NDArray[Any], *, scorer: str,
        method: Method = "isotonic") -> Calibration:
    """A monotone map from `scores` to P(label = 1), fitted on all rows whose score is not NaN."""
    x, y = _clean(scores, labels)
    if len(x) < _MIN_ROWS or len(np.unique(y)) < _MIN_ROWS:
        raise ConfigError(f"calibration needs scored rows of both labels (got {len(x)} rows, "
                          f"{int(y.sum())} positive)")
    rows, positives = len(x), int(y.sum())
    if method == "platt":
        a, b = _platt(x, y)
        return Calibration(scorer, method, a=a, b=b, rows=rows, positives=positives)
    if method != "isotonic":
        raise ConfigError(f"unknown calibration method {method!r}; choose isotonic or platt")
    knots_x, knots_y = _isotonic(x, y)
    return Calibration(scorer, method, x=tuple(knots_x.tolist()), y=tuple(knots_y.tolist()), rows=rows,
                       positives=positives)


def apply(calibration: Calibration, scores: Sequence[float] | Floats, *, scorer: str | None = None) -> Floats:
    """Calibrated probabilities of `scores`; with `scorer`, refuses scores of a scorer it was not fitted for."""
    if scorer is not None and scorer != calibration.scorer:
        raise ConfigError(f"the calibration was fitted for the {calibration.scorer!r} scorer, "
                          f"not for {scorer!r}; fit one for {scorer!r} with `tlmscore calibrate`")
    return calibration(scores)


class Calibrated:
    """A scorer that wraps another and adds the column `calibrated_score` to each of its scores.

    A scorer like any other, so every engine runs it as it runs the scorer it wraps (on Ray, in
    each scoring actor). Refuses, when made, a calibration fitted for another scorer.
    """

    columns = ("calibrated_score",)

    def __init__(self, scorer: Scorer, calibration: Calibration) -> None:
        apply(calibration, [], scorer=scorer.name)
        self._scorer = scorer
        self._calibration = calibration

    @property
    def name(self) -> str:
        """The wrapped scorer's name: the rows' `scorer` column is the one that gave the raw score."""
        return self._scorer.name

    @property
    def cpu_bound(self) -> bool:
        """As the wrapped scorer: calibrating a score costs next to nothing."""
        return bool(getattr(self._scorer, "cpu_bound", False))

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """The wrapped scorer's scores, each with `calibrated_score` (NaN where the score is NaN)."""
        scores = await self._scorer.score_many(inputs)
        values = self._calibration([s.score for s in scores]).tolist() if scores else []
        return [replace(s, columns={**s.columns, "calibrated_score": v}) for s, v in zip(scores, values, strict=True)]


def reliability(probabilities: Sequence[float] | Floats, labels: Sequence[Any] | npt.NDArray[Any], *,
                bins: int = 10) -> tuple[ReliabilityBin, ...]:
    """Equal-width bins over [0, 1] (the last one closed) with their counts, mean probability and accuracy."""
    p, y = _clean(probabilities, labels)
    edges = np.linspace(0.0, 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, bins - 1)
    found = []
    for i in range(bins):
        members = index == i
        count = int(members.sum())
        found.append(ReliabilityBin(float(edges[i]), float(edges[i + 1]), count,
                                    float(p[members].mean()) if count else math.nan,
                                    float(y[members].mean()) if count else math.nan))
    return tuple(found)


def expected_calibration_error(probabilities: Sequence[float] | Floats,
                               labels: Sequence[Any] | npt.NDArray[Any], *, bins: int = 10) -> float:
    """ECE: the row-weighted mean gap between mean probability and accuracy over equal-width bins."""
    table = reliability(probabilities, labels, bins=bins)
    total = sum(b.count for b in table)
    if not total:
        return math.nan
    return sum(b.count * abs(b.mean_probability - b.accuracy) for b in table if b.count) / total


def _fold_ids(y: Floats, folds: int, seed: int) -> npt.NDArray[np.int64]:
    """Fold of each row, stratified by label so every fold holds both labels when it can."""
    rng = np.random.default_rng(seed)
    ids = np.empty(len(y), dtype=np.int64)
    for value in (0.0, 1.0):
        rows = np.flatnonzero(y == value)
        rng.shuffle(rows)
        ids[rows] = np.arange(len(rows)) % folds
    return ids


def cross_validate(scores: Sequence[float] | Floats, labels: Sequence[Any] | npt.NDArray[Any], *,
                   method: Method = "isotonic", folds: int = 5, bins: int = 10, seed: int = 0) -> CrossValidation:
    """ECE of the raw scores and of maps fitted on the other folds, both over every held-out row."""
    x, y = _clean(scores, labels)
    fewest = int(min(y.sum(), len(y) - y.sum()))
    if fewest < _MIN_ROWS:
        raise ConfigError(f"cross-validation needs at least {_MIN_ROWS} scored rows of each label "
                          f"(got {int(y.sum())} positive of {len(y)})")
    folds = max(2, min(folds, fewest))
    ids = _fold_ids(y, folds, seed)
    calibrated = np.empty_like(x)
    for k in range(folds):
        held = ids == k
        calibrated[held] = fit(x[~held], y[~held], scorer="", method=method)(x[held])
    return CrossValidation(folds, expected_calibration_error(x, y, bins=bins),
                           expected_calibration_error(calibrated, y, bins=bins),
                           reliability(x, y, bins=bins), reliability(calibrated, y, bins=bins))


def save(calibration: Calibration, path: str | Path) -> None:
    """Write `calibration` as JSON (with a format tag, so a file of another kind is refused on load)."""
    data = plain({"format": FORMAT, **asdict(calibration)})  # NaN as None: strict JSON
    Path(path).write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def load(path: str | Path) -> Calibration:
    """The calibration saved at `path`; a `ConfigError` names the file when it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read a calibration file: {exc}") from None
    if not isinstance(data, dict) or data.pop("format", None) != FORMAT:
        raise ConfigError(f"{path}: not a tlmscore calibration file (no format {FORMAT!r})")
    try:
        data["x"], data["y"] = tuple(data.get("x", ())), tuple(data.get("y", ()))
        return Calibration(**data)
    except TypeError as exc:
        raise ConfigError(f"{path}: malformed calibration file: {exc}") from None
