"""The page store's read-back on the Ray engine, without a cluster: a read a node's death broke is made again."""

from __future__ import annotations

from typing import Any

import pytest

from tlmscore import Settings
from tlmscore.ray import _pages

pytestmark = pytest.mark.system("ray")  # Ray's own errors: the `ray` extra, which the tier installs


class _Listing:
    """A dataset whose reading fails (as a lost listing actor makes it fail) a given number of times."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.reads = 0

    def materialize(self) -> str:
        self.reads += 1
        if self.reads <= self.failures:
            import ray.exceptions

            raise ray.exceptions.ActorDiedError()
        return "the pages"


def _store(monkeypatch: pytest.MonkeyPatch, listing: _Listing | None) -> list[str]:
    asked: list[str] = []

    def stored(store: str | None, settings: Settings) -> Any:
        asked.append(str(store))
        return listing

    monkeypatch.setattr(_pages, "stored_pages", stored)
    return asked


@pytest.mark.parametrize("failures", [0, 1, 2])
def test_a_read_back_broken_by_a_lost_node_is_made_again(monkeypatch: pytest.MonkeyPatch, failures: int) -> None:
    listing = _Listing(failures)
    asked = _store(monkeypatch, listing)
    assert _pages.read_back("store", Settings()) == "the pages"
    assert listing.reads == failures + 1
    assert asked == ["store"] * (failures + 1)  # the store listed again each time, not the failed dataset reused


def test_a_read_back_that_keeps_failing_raises_after_its_tries(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray.exceptions

    listing = _Listing(failures=10)
    _store(monkeypatch, listing)
    with pytest.raises(ray.exceptions.ActorDiedError):
        _pages.read_back("store", Settings())
    assert listing.reads == 3


def test_an_empty_store_reads_back_as_none(monkeypatch: pytest.MonkeyPatch) -> None:
    _store(monkeypatch, None)
    assert _pages.read_back("store", Settings()) is None


def test_an_error_that_is_not_ray_s_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def broken(store: str | None, settings: Settings) -> Any:
        calls.append(1)
        raise OSError("the store's folder is unreadable")

    monkeypatch.setattr(_pages, "stored_pages", broken)
    with pytest.raises(OSError, match="unreadable"):
        _pages.read_back("store", Settings())
    assert len(calls) == 1
