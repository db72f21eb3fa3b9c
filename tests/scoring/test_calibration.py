"""Calibration: isotonic and Platt maps, ECE and reliability, cross-validation, files, and the
`Calibrated` scorer wrapper (the command line's `calibrate` is in tests/cli/test_calibrate.py)."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tlmscore.errors import ConfigError
from tlmscore.model import ScoringInput
from tlmscore.scoring import Score, calibration


def miscalibrated(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scores that rank well but are overconfident: P(correct | s) = s**3, not s."""
    rng = np.random.default_rng(seed)
    scores = rng.uniform(0, 1, n)
    labels = (rng.uniform(0, 1, n) < scores**3).astype(int)
    return scores, labels


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_fit_save_load_apply_round_trips(tmp_path: Path, method: calibration.Method) -> None:
    scores, labels = miscalibrated(400)
    fitted = calibration.fit(scores, labels, scorer="grounding", method=method)
    calibration.save(fitted, tmp_path / "calib.json")
    loaded = calibration.load(tmp_path / "calib.json")
    assert loaded.scorer == "grounding" and loaded.method == method and loaded.rows == 400
    probe = np.linspace(-0.2, 1.2, 57)
    assert np.allclose(calibration.apply(loaded, probe), calibration.apply(fitted, probe))
    assert json.loads((tmp_path / "calib.json").read_text())["format"] == calibration.FORMAT


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_the_map_is_monotone_and_a_probability(method: calibration.Method) -> None:
    scores, labels = miscalibrated(300, seed=3)
    fitted = calibration.fit(scores, labels, scorer="judge", method=method)
    out = calibration.apply(fitted, np.linspace(-1, 2, 301))
    assert np.all(np.diff(out) >= -1e-12)
    assert out.min() >= 0.0 and out.max() <= 1.0
    assert fitted(np.array([0.2]))[0] < fitted(np.array([0.9]))[0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=2, max_size=60))
def test_isotonic_is_monotone_on_any_data(rows: list[tuple[float, bool]]) -> None:
    scores = [s for s, _ in rows]
    labels = [int(y) for _, y in rows]
    if len(set(labels)) < 2:
        with pytest.raises(ConfigError, match="both labels"):
            calibration.fit(scores, labels, scorer="x")
        return
    fitted = calibration.fit(scores, labels, scorer="x")
    assert all(a < b for a, b in itertools.pairwise(fitted.x))
    assert all(a <= b for a, b in itertools.pairwise(fitted.y))
    assert np.all(np.diff(fitted(np.linspace(0, 1, 101))) >= -1e-12)


def test_pav_pools_violators_to_their_mean() -> None:
    fitted = calibration.fit([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1], scorer="x")
    assert fitted.x == (0.1, 0.2, 0.3, 0.4)
    assert fitted.y == (0.0, 0.5, 0.5, 1.0)
    assert fitted([0.25])[0] == 0.5  # flat across a pooled block
    steps = calibration.fit([0.1, 0.2, 0.5, 0.8, 0.9], [0, 0, 1, 1, 1], scorer="x")
    assert list(steps([0.1, 0.2, 0.35, 0.5, 0.9])) == pytest.approx([0.0, 0.0, 0.5, 1.0, 1.0])  # linear between blocks


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_calibration_lowers_ece_on_held_out_folds(method: calibration.Method) -> None:
    scores, labels = miscalibrated(2000, seed=7)
    check = calibration.cross_validate(scores, labels, method=method, folds=5)
    assert check.folds == 5
    assert check.ece_raw > 0.15
    assert check.ece_calibrated < check.ece_raw / 3
    assert sum(b.count for b in check.bins_raw) == sum(b.count for b in check.bins_calibrated) == 2000


def test_ece_and_reliability() -> None:
    assert calibration.expected_calibration_error([0.9, 0.9, 0.1, 0.1], [1, 1, 0, 0]) == pytest.approx(0.1)
    assert calibration.expected_calibration_error([0.8] * 10, [1] * 5 + [0] * 5) == pytest.approx(0.3)
    bins = calibration.reliability([0.05, 1.0, 0.55], [0, 1, 1], bins=10)
    assert [b.count for b in bins] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert math.isnan(bins[1].accuracy)


def test_nan_scores_stay_nan_and_are_left_out_of_fitting() -> None:
    fitted = calibration.fit([0.1, math.nan, 0.9, 0.2, 0.8], [0, 1, 1, 0, 1], scorer="x")
    assert fitted.rows == 4
    out = calibration.apply(fitted, [math.nan, 0.5])
    assert math.isnan(out[0]) and 0 <= out[1] <= 1


def test_a_calibration_for_another_scorer_is_refused(tmp_path: Path) -> None:
    fitted = calibration.fit([0.1, 0.9], [0, 1], scorer="grounding")
    with pytest.raises(ConfigError, match="fitted for the 'grounding' scorer, not for 'judge'"):
        calibration.apply(fitted, [0.5], scorer="judge")
    (tmp_path / "other.json").write_text('{"scorer": "x"}')
    with pytest.raises(ConfigError, match="not a tlmscore calibration file"):
        calibration.load(tmp_path / "other.json")


def test_cross_validation_needs_two_rows_of_each_label() -> None:
    with pytest.raises(ConfigError, match="at least 2 scored rows of each label"):
        calibration.cross_validate([0.1, 0.5, 0.9], [0, 0, 1])
    assert calibration.cross_validate([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], folds=10).folds == 2


def test_bad_labels_are_refused() -> None:
    with pytest.raises(ConfigError, match="0/1"):
        calibration.fit([0.1, 0.5, 0.9], [0, 2, 1], scorer="x")
    with pytest.raises(ConfigError, match="one label per score"):
        calibration.fit([0.1, 0.5], [0, 1, 1], scorer="x")


# ---------------------------------------------------------------- the command line


def test_calibrated_wraps_any_scorer_and_adds_its_column() -> None:
    fitted = calibration.fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], scorer="fixed")
    inner = Fixed({"low": 0.15, "high": 0.85})
    wrapped = calibration.Calibrated(inner, fitted)
    items = [ScoringInput(prompt=p, response="r") for p in ("low", "high", "none")]
    scores = asyncio.run(wrapped.score_many(items))
    assert [s.score for s in scores[:2]] == [0.15, 0.85] and math.isnan(scores[2].score)
    got = [s.columns["calibrated_score"] for s in scores]
    assert got[:2] == calibration.apply(fitted, [0.15, 0.85]).tolist() and got[0] < got[1]
    assert math.isnan(got[2])
    with pytest.raises(ConfigError, match="fitted for the 'grounding' scorer"):
        calibration.Calibrated(inner, calibration.fit([0.1, 0.9], [0, 1], scorer="grounding"))


class Fixed:
    """A scorer with a score per prompt (NaN for others)."""

    name = "fixed"

    def __init__(self, by_prompt: dict[str, float]) -> None:
        self.by_prompt = by_prompt

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        return [Score(self.by_prompt[x.prompt]) if x.prompt in self.by_prompt else Score.unscorable("no")
                for x in inputs]
