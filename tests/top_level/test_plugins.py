"""The two shapes a plug-in kind's entry point may load: named items, or one factory named by the entry point."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tlmscore.output import PLUGINS as SINKS
from tlmscore.plugins import factories, named_items
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
