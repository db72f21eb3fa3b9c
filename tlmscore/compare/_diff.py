"""Two scored runs joined row by row: what dropped, rose, crossed the threshold, broke or was fixed.

Pure: rows in, a `Comparison` out. A row is *scored* when its score is a number and it has no
error; otherwise it is *not scorable* (an error row, or a NaN score) and the reason is its error.
A row scored before that is not scorable now is a *new error* when it has an error, and *newly
unscored* when it only has no score (its `error` empty: the scorer found nothing to score).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tlmscore.compare._stats import Interval, paired_bootstrap
from tlmscore.errors import ConfigError
from tlmscore.output import score_of


@dataclass(frozen=True)
class RowChange:
    """One key found in both runs."""

    key: str
    base: float
    new: float
    base_error: str | None
    new_error: str | None
    explanation: str | None
    group: str | None = None

    @property
    def base_scored(self) -> bool:
        """The base row has a score."""
        return not self.base_error and not math.isnan(self.base)

    @property
    def new_scored(self) -> bool:
        """The new row has a score."""
        return not self.new_error and not math.isnan(self.new)

    @property
    def delta(self) -> float:
        """The new score minus the base score, NaN unless both are scored."""
        return self.new - self.base if self.base_scored and self.new_scored else math.nan


@dataclass(frozen=True)
class Summary:
    """Figures over a set of joined rows (all of them, or one `--by` group)."""

    rows: int
    paired: int
    base_mean: float
    new_mean: float
    mean_delta: Interval
    dropped: int
    rose: int
    newly_flagged: int
    newly_passing: int
    new_errors: int
    """Rows scored before that have an error now."""
    fixed_errors: int
    new_flagged_rate: float
    newly_unscored: int = 0
    """Rows scored before that have no score now and no error (the scorer found nothing to score)."""


@dataclass(frozen=True)
class Comparison:
    """Everything `tlmscore compare` found, before any gate is applied."""

    key: str
    threshold: float
    rows: tuple[RowChange, ...]
    only_base: tuple[str, ...]
    only_new: tuple[str, ...]
    summary: Summary
    groups: dict[str, Summary] = field(default_factory=dict)
    by: str | None = None

    def dropped(self) -> list[RowChange]:
        """Scored rows whose score went down, the largest drop first."""
        return sorted((r for r in self.rows if r.delta < 0), key=lambda r: (r.delta, r.key))

    def rose(self) -> list[RowChange]:
        """Scored rows whose score went up, the largest rise first."""
        return sorted((r for r in self.rows if r.delta > 0), key=lambda r: (-r.delta, r.key))

    def newly_flagged(self) -> list[RowChange]:
        """Rows at or above the threshold before and below it now."""
        return [r for r in self.rows if r.base_scored and r.new_scored
                and r.base >= self.threshold > r.new]

    def newly_passing(self) -> list[RowChange]:
        """Rows below the threshold before and at or above it now."""
        return [r for r in self.rows if r.base_scored and r.new_scored
                and r.new >= self.threshold > r.base]

    def new_errors(self) -> list[RowChange]:
        """Rows scored before that have an error now."""
        return [r for r in self.rows if r.base_scored and bool(r.new_error)]

    def newly_unscored(self) -> list[RowChange]:
        """Rows scored before that have no score now and no error."""
        return [r for r in self.rows if r.base_scored and not r.new_scored and not r.new_error]

    def fixed_errors(self) -> list[RowChange]:
        """Rows not scorable before and scored now."""
        return [r for r in self.rows if not r.base_scored and r.new_scored]


def _keyed(rows: Iterable[Mapping[str, Any]], key: str, name: str) -> dict[str, Mapping[str, Any]]:
    keyed: dict[str, Mapping[str, Any]] = {}
    for index, row in enumerate(rows, start=1):
        value = row.get(key)
        if value is None:
            raise ConfigError(f"{name}: row {index} has no {key!r} column to join on")
        text = str(value)
        if text in keyed:
            raise ConfigError(f"{name}: {key} {text!r} appears more than once (row {index}); "
                              "join on a unique column with --key")
        keyed[text] = row
    return keyed


def group_of(row: Mapping[str, Any], column: str) -> str:
    """A row's `--by` value: its column, or that key of its `metadata`; "(none)" when absent or empty."""
    value = row.get(column)
    metadata = row.get("metadata")
    if value is None and isinstance(metadata, Mapping):
        value = metadata.get(column)
    return "(none)" if value is None or str(value) == "" else str(value)


def _change(key: str, base: Mapping[str, Any], new: Mapping[str, Any], by: str | None) -> RowChange:
    explanation = new.get("explanation")
    return RowChange(key=key, base=score_of(base.get("score")), new=score_of(new.get("score")),
                     base_error=base.get("error"),
                     new_error=new.get("error"), explanation=None if explanation is None else str(explanation),
                     group=group_of(new, by) if by else None)


def summarise(rows: Sequence[RowChange], threshold: float, *, seed: int, resamples: int,
              confidence: float) -> Summary:
    """The figures of `rows`; the mean difference's interval is a seeded paired bootstrap."""
    paired = [r for r in rows if r.base_scored and r.new_scored]
    new_scored = [r.new for r in rows if r.new_scored]
    return Summary(
        rows=len(rows), paired=len(paired),
        base_mean=_mean([r.base for r in paired]), new_mean=_mean([r.new for r in paired]),
        mean_delta=paired_bootstrap([r.delta for r in paired], seed=seed, resamples=resamples,
                                    confidence=confidence),
        dropped=sum(r.delta < 0 for r in paired), rose=sum(r.delta > 0 for r in paired),
        newly_flagged=sum(r.base >= threshold > r.new for r in paired),
        newly_passing=sum(r.new >= threshold > r.base for r in paired),
        new_errors=sum(r.base_scored and bool(r.new_error) for r in rows),
        fixed_errors=sum(r.new_scored and not r.base_scored for r in rows),
        new_flagged_rate=_mean([float(s < threshold) for s in new_scored]),
        newly_unscored=sum(r.base_scored and not r.new_scored and not r.new_error for r in rows),
    )


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def compare_rows(base: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]], *,
                 key: str = "id", threshold: float = 0.5, by: str | None = None, seed: int = 0,
                 resamples: int = 2000, confidence: float = 0.95, names: tuple[str, str] = ("BASE", "NEW"),
                 ) -> Comparison:
    """Join `base` and `new` (rows as `tlmscore.output.read_rows` gives them) on `key` and compare them.

    A `ConfigError` when a side has a row without `key`, a key twice, or the two share no key.
    """
    base_keyed, new_keyed = _keyed(base, key, names[0]), _keyed(new, key, names[1])
    common = [k for k in new_keyed if k in base_keyed]
    if not common:
        raise ConfigError(f"{names[0]} and {names[1]} share no {key!r}: nothing to compare")
    rows = tuple(_change(k, base_keyed[k], new_keyed[k], by) for k in common)
    figures = functools.partial(summarise, threshold=threshold, seed=seed, resamples=resamples, confidence=confidence)
    groups = {name: figures([r for r in rows if r.group == name])
              for name in sorted({str(r.group) for r in rows})} if by else {}
    return Comparison(
        key=key, threshold=threshold, rows=rows,
        only_base=tuple(k for k in base_keyed if k not in new_keyed),
        only_new=tuple(k for k in new_keyed if k not in base_keyed),
        summary=figures(rows), groups=groups, by=by)
