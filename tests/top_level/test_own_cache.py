"""No test reads or fills the user's page cache."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tlmscore.settings import Settings


def test_a_test_never_gets_the_users_page_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Settings made without a cache folder, in a test or at a test module's import, point into the tests'
    own folders (tests/conftest.py), so no test reads or fills ~/.cache/tlmscore."""
    import tests.convert.test_provider_shapes as made_at_import

    user = Path.home() / ".cache" / "tlmscore"
    here = Settings().cache_dir
    assert here != user and here.is_relative_to(tmp_path_factory.getbasetemp())
    assert made_at_import.OFFLINE.cache_dir.is_relative_to(tempfile.gettempdir())  # made at import or in this test
    assert Settings().cache_dir == here  # the same folder all through one test
