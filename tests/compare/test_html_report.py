"""The HTML report of `tlmscore compare` opened in a real headless Chromium (Debian's `chromium` package),
offline: the screenshot shows both plots, side by side.

The histogram's bars are the only half-transparent base/new colours on the page and the scatter's
dropped rows the only red dots, so where those pixels are tells whether each plot was drawn.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tlmscore.cli import main
from tlmscore.compare._svg import BASE_COLOUR, DROPPED_COLOUR, NEW_COLOUR

ROWS = 40


def _rgb(colour: str, alpha: float = 1.0) -> tuple[int, int, int]:
    """The colour as drawn over white with `alpha`."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return tuple(round(alpha * c + (1 - alpha) * 255) for c in (r, g, b))  # type: ignore[return-value]


def _box(image: Image.Image, colour: tuple[int, int, int], tolerance: int = 6) -> tuple[int, int, int, int, int]:
    """(count, left, top, right, bottom) of the pixels within `tolerance` of `colour`."""
    pixels = np.asarray(image.convert("RGB"), dtype=np.int16)
    near = (np.abs(pixels - np.asarray(colour, dtype=np.int16)) <= tolerance).all(axis=2)
    ys, xs = np.nonzero(near)
    if not len(xs):
        return (0, -1, -1, -1, -1)
    return (len(xs), int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))


@pytest.fixture
def report(tmp_path: Path) -> Path:
    base, new = tmp_path / "base.jsonl", tmp_path / "new.jsonl"
    rows = [{"id": f"r{i}", "source": "log.jsonl", "line": i + 1, "score": 0.3 + 0.6 * i / ROWS, "error": None,
             "explanation": f"row {i}"}
            for i in range(ROWS)]
    base.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    changed = [r | {"score": r["score"] - 0.25} if i % 4 == 0 else r for i, r in enumerate(rows)]
    new.write_text("".join(json.dumps(r) + "\n" for r in changed), encoding="utf-8")
    page = tmp_path / "report.html"
    assert main(["compare", str(base), str(new), "--max-drop", "0.1", "--report", str(page)]) == 1
    return page


def test_the_page_is_self_contained(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert "<script" not in text
    assert "src=" not in text
    assert "href=" not in text
    assert text.count("<svg ") == 2


@pytest.mark.system("chromium")
def test_chromium_shows_both_plots(report: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium")
    assert browser is not None
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1100",
                    f"--screenshot={shot}", report.as_uri()],
                   check=True, capture_output=True, timeout=180)
    image = Image.open(shot)
    base_bars = _box(image, _rgb(BASE_COLOUR, 0.5))
    new_bars = _box(image, _rgb(NEW_COLOUR, 0.5))
    dots = _box(image, _rgb(DROPPED_COLOUR))
    assert base_bars[0] > 500
    assert new_bars[0] > 500  # both histograms are drawn, with area
    assert dots[0] > 8 * 60  # ten dropped rows' dots (and the legend's square)
    histogram_right = max(base_bars[3], new_bars[3])
    assert dots[1] > histogram_right  # the scatter is beside the histogram, not on it
    assert abs(dots[2] - base_bars[2]) < 400  # and on the same band of the page
