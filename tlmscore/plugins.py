"""Plug-ins: one loader and one precedence rule for every kind of extension.

A kind of plug-in (`Kind`) is an entry-point group and a check of what its entry points load:
source readers (`tlmscore.sources`), trace-store connectors (`tlmscore.connectors`), item
converters (`tlmscore.converters`), scorers (`tlmscore.scorers`) and output sinks
(`tlmscore.sinks`). Each stage declares its kind
beside its built-ins and asks `plugins(kind)` for the items installed packages add.

The rule is the same for every kind: built-ins come first, and a plug-in never replaces one. An
entry point that would (an item named as a built-in is) is refused with a warning; one that fails
to load, or loads something that is not of its kind, is skipped with a warning. So an installed
package can add to what tlmscore does but not silently change it, and a broken one never stops a
run. Entry points are read once per process (installed packages do not change while it runs;
`forget()` reads them again); `loaded(kind)` says what was taken, refused and skipped, which
`tlmscore plugins` lists.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Entry", "Kind", "Loaded", "factories", "forget", "loaded", "named_items", "plugins"]

T = TypeVar("T")


@dataclass(frozen=True)
class Kind(Generic[T]):
    """A kind of plug-in.

    `builtin()` names the built-ins (which no plug-in may take); `accept(name, value)` turns what
    an entry point named `name` loaded into the items it adds, by name, and raises `TypeError` when
    the value is not of this kind.
    """

    name: str
    group: str
    builtin: Callable[[], Collection[str]]
    accept: Callable[[str, Any], Mapping[str, T]]


@dataclass(frozen=True)
class Entry:
    """One entry point of a kind's group: what it added, or why it was refused or skipped."""

    name: str
    value: str
    distribution: str | None
    added: tuple[str, ...] = ()
    problem: str | None = None


@dataclass(frozen=True)
class Loaded(Generic[T]):
    """What a kind's entry points gave: the items taken (by name) and every entry point's fate."""

    items: Mapping[str, T]
    entries: tuple[Entry, ...]


def _distribution(ep: EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return None if dist is None else f"{dist.metadata['Name']} {dist.version}"


def _load(kind: Kind[T], ep: EntryPoint, taken: dict[str, T], builtin: Collection[str]) -> Entry:
    """Load one entry point into `taken`; the entry says what it added or what went wrong."""
    entry = Entry(ep.name, ep.value, _distribution(ep))
    try:
        items = dict(kind.accept(ep.name, ep.load()))
    except Exception as exc:  # noqa: BLE001  (a broken plug-in must not stop a run)
        return dataclasses.replace(entry, problem=f"skipped: {type(exc).__name__}: {exc}")
    shadowed = sorted(name for name in items if name in builtin)
    if shadowed:
        return dataclasses.replace(entry, problem=f"refused: it would replace the built-in "
                                                  f"{', '.join(map(repr, shadowed))}")
    clash = sorted(name for name in items if name in taken)
    if clash:
        return dataclasses.replace(entry, problem=f"refused: an earlier plug-in already adds "
                                                  f"{', '.join(map(repr, clash))}")
    taken.update(items)
    return dataclasses.replace(entry, added=tuple(items))


class _EntryPoints(Protocol):
    """What `entry_points()` returns (groups by name before Python 3.12, one collection since): both select."""

    def select(self, *, group: str) -> Iterable[EntryPoint]: ...


@functools.cache
def _installed() -> _EntryPoints:
    """Every installed entry point, read once: reading walks every installed distribution, whatever the group."""
    return entry_points()


def forget() -> None:
    """Read the installed entry points again at their next use (a package was installed since they were read)."""
    _installed.cache_clear()
    loaded.cache_clear()


@functools.cache
def loaded(kind: Kind[T]) -> Loaded[T]:
    """Every entry point of the kind's group, in a fixed order (name, then value), loaded once per process.

    A refused or skipped entry point is reported as a warning (`tlmscore: …`), once.
    """
    builtin = set(kind.builtin())
    taken: dict[str, T] = {}
    entries = []
    for ep in sorted(_installed().select(group=kind.group), key=lambda e: (e.name, e.value)):
        entry = _load(kind, ep, taken, builtin)
        entries.append(entry)
        if entry.problem is not None:
            warnings.warn(f"tlmscore: {kind.name} plug-in {ep.name!r} ({ep.value}) {entry.problem}", stacklevel=2)
    return Loaded(MappingProxyType(taken), tuple(entries))


def plugins(kind: Kind[T]) -> Mapping[str, T]:
    """The items installed packages add to a kind (never one named as a built-in)."""
    return loaded(kind).items


def named_items(of: type[Any]) -> Callable[[str, Any], Mapping[str, Any]]:
    """The `accept` of a kind whose entry points load one item of `of`, or a sequence of them, each by its name.

    `of` is a class or a runtime-checkable protocol.
    """
    def accept(name: str, value: Any) -> Mapping[str, Any]:
        items = list(value) if isinstance(value, Sequence) else [value]
        wrong = [type(item).__name__ for item in items if not isinstance(item, of)]
        if wrong:
            raise TypeError(f"not a {of.__name__}: {', '.join(wrong)}")
        return {item.name: item for item in items}
    return accept


def factories(signature: str, key: Callable[[str], str] = str) -> Callable[[str, Any], Mapping[str, Any]]:
    """The `accept` of a kind whose entry points each load a factory (`signature` says what it is), by `key(name)`."""
    def accept(name: str, value: Any) -> Mapping[str, Any]:
        if not callable(value):
            raise TypeError(f"must be a factory {signature}, not {type(value).__name__}")
        return {key(name): value}
    return accept
