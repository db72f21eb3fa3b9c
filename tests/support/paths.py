"""Where the tests find the checkout, the bundled fixtures and the optional shared corpus."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: the folder holding `tlmscore/`, `tests/` and `fixtures/`."""
FIXTURES = ROOT / "fixtures"
"""The project's own fixtures: what every test needs."""
CORPUS = ROOT.parent / "shared" / "corpus"
"""Optional: real recorded material beside the checkout. It only adds cases; `fixtures/` is what every test needs."""
