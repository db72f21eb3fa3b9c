"""A pytest plugin: the `tlmscore_snapshot` fixture guards golden prompts in a user's test suite.

    def test_prompts_did_not_change(tlmscore_snapshot):
        tlmscore_snapshot.check("tests/tlm_fixtures")

A folder recorded with `tlmscore fixtures record DIR --scorer NAME` guards scores too
(`check(folder, score_tolerance=0.02)` overrides the folder's tolerance).
A change fails the test with a unified diff per transcript; `pytest --tlmscore-update` rewrites
the golden files instead (and records a folder that has none yet).

pytest loads this module in every session of every project where tlmscore is installed, so it
imports nothing of tlmscore at load time: the pipeline is imported when a snapshot is checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tlmscore.settings import Settings

__all__ = ["Snapshot", "pytest_addoption", "tlmscore_snapshot"]


class Snapshot:
    """Checks fixture folders against their golden files, offline."""

    def __init__(self, *, update: bool, settings: Settings | None = None) -> None:
        self.update = update
        self.settings = settings

    def check(self, folder: str | Path, settings: Settings | None = None, *,
              score_tolerance: float | None = None) -> None:
        """Fail the calling test with a diff when any golden file of `folder` would change.

        A folder recorded with a scorer is scored too: a score further than its tolerance (the
        folder's, or `score_tolerance`) from the golden score fails the test.
        """
        from tlmscore.fixtures import GOLDEN, check_fixtures, record_fixtures  # noqa: PLC0415  (see module doc)
        from tlmscore.settings import Settings  # noqa: PLC0415

        path = Path(folder)
        settings = settings or self.settings or Settings()
        if not (path / GOLDEN).is_dir():
            if not self.update:
                pytest.fail(f"{path} has no golden files yet: run `tlmscore fixtures record {path}` "
                            "or pytest with --tlmscore-update", pytrace=False)
            record_fixtures(path, settings)
            return
        report = check_fixtures(path, settings, update=self.update, score_tolerance=score_tolerance)
        if not report.ok and not self.update:
            pytest.fail(f"{len(report.changed)} transcripts changed: {', '.join(report.changed)}\n\n"
                        + "\n".join(report.diffs), pytrace=False)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add `--tlmscore-update`."""
    parser.addoption("--tlmscore-update", action="store_true", default=False,
                     help="rewrite tlmscore golden files instead of failing on a change")


@pytest.fixture
def tlmscore_snapshot(request: pytest.FixtureRequest) -> Snapshot:
    """A `Snapshot` that honours `--tlmscore-update`."""
    return Snapshot(update=bool(request.config.getoption("--tlmscore-update")))
