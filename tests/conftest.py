"""Shared test helpers: where the bundled fixtures and the optional shared corpus live."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture
def demo_path() -> Path:
    return FIXTURES / "demo.jsonl"


@pytest.fixture
def corpus_responses() -> Path:
    folder = CORPUS / "responses"
    if not folder.is_dir():
        pytest.skip(f"shared corpus not present at {folder}")
    return folder
