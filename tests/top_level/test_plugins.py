"""The two shapes a plug-in kind's entry point may load (named items, or one factory named by the entry point),
and the installed entry points read once per process."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import pytest

from tlmscore import plugins as plugins_module
from tlmscore.output import PLUGINS as SINKS
from tlmscore.plugins import factories, forget, named_items, plugins
from tlmscore.scoring.base import PLUGINS as SCORERS


@dataclass(frozen=True)
class Thing:
    name: str


def test_named_items_are_keyed_by_their_name_and_anything_else_is_refused() -> None:
    accept = named_items(Thing)
    a, b = Thing("a"), Thing("b")
    assert accept("entry", a) == {"a": a}
    assert accept("entry", [a, b]) == {"a": a, "b": b}
    with pytest.raises(TypeError, match="not a Thing: int, str"):
        accept("entry", [a, 3, "x"])


def test_a_factory_is_keyed_by_its_entry_point_and_must_be_callable() -> None:
    def make(options: object) -> object:
        return options

    assert factories("(options) -> X")("mine", make) == {"mine": make}
    with pytest.raises(TypeError, match=r"must be a factory \(options\) -> X, not int"):
        factories("(options) -> X")("mine", 3)
    assert SCORERS.accept("acme", make) == {"acme": make}
    assert SINKS.accept("TSV", make) == {".tsv": make}  # a sink is keyed by the file suffix its entry point names
    with pytest.raises(TypeError, match="RowSink"):
        SINKS.accept("tsv", "not callable")


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How often the installed distributions' entry points are read, from a fresh start."""
    count: list[int] = []

    def counted(**params: Any) -> Any:
        count.append(1)
        return entry_points(**params)

    forget()
    monkeypatch.setattr(plugins_module, "entry_points", counted)
    yield count
    forget()


def test_the_installed_entry_points_are_read_once_for_every_kind(reads: list[int]) -> None:
    assert dict(plugins(SCORERS)) == {} and dict(plugins(SINKS)) == {}  # this checkout installs no plug-in
    assert len(reads) == 1  # a read walks every installed distribution: the kinds share one
    forget()
    plugins(SCORERS)
    assert len(reads) == 2
