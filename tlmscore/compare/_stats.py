"""The mean of paired differences with a percentile bootstrap interval, seeded so a report is reproducible."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

_BLOCK = 4_000_000
"""Row indices drawn at once (32 MB)."""


@dataclass(frozen=True)
class Interval:
    """A mean and its confidence interval (all NaN when there is nothing to average)."""

    mean: float
    low: float
    high: float
    confidence: float


def paired_bootstrap(deltas: Sequence[float], *, seed: int = 0, resamples: int = 2000,
                     confidence: float = 0.95) -> Interval:
    """The mean of `deltas` (new score minus base score, per row) and a percentile interval from resampling rows.

    Rows are resampled as pairs (each delta is one row's two scores), so the interval reflects the
    row-to-row spread of the change, not of the scores themselves. The same seed gives the same interval.
    """
    if not deltas:
        return Interval(math.nan, math.nan, math.nan, confidence)
    import numpy as np  # noqa: PLC0415 -- only `compare` needs it; every command's start-up would load it

    values = np.asarray(deltas, dtype=np.float64)
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK // len(values))  # resamples drawn together: memory stays bounded for big runs
    means = np.concatenate([values[rng.integers(0, len(values), size=(min(block, resamples - start), len(values)))]
                            .mean(axis=1) for start in range(0, resamples, block)])
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(float(values.mean()), float(low), float(high), confidence)
