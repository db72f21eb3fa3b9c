"""The converter registry, keyed on `item["type"]`; each family module contributes its types.

Other packages add converters for item types of their own through the `tlmscore.converters`
entry-point group, as scorers are added through `tlmscore.scorers`: an entry point named after an
item type loads an `ItemConverter` (or a plain `convert(item, ctx) -> list[Turn]` function, taken
as a context item), and an entry point may also load a mapping of item types to converters. A
plug-in never replaces a built-in converter (it is refused with a warning: `tlmscore.plugins`); a
caller who means to can pass converters of its own to `converters(extra)`, and through it to
`convert_transcript`, `tlmscore.prepare` and `tlmscore.score`, which win over both.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tlmscore.convert import _code, _computer, _custom, _files, _functions, _images, _mcp, _messages, _shell, _web
from tlmscore.convert.context import Converter, ItemConverter
from tlmscore.model import item_type
from tlmscore.plugins import Kind, plugins

__all__ = ["ENTRY_POINT_GROUP", "PLUGINS", "REGISTRY", "ConverterLike", "converters", "item_type",
           "plugin_converters"]

ENTRY_POINT_GROUP = "tlmscore.converters"
ConverterLike = ItemConverter | Converter
"""What may be given for an item type: an `ItemConverter`, or a bare function (a context item)."""

REGISTRY: Mapping[str, ItemConverter] = MappingProxyType({
    **_messages.CONVERTERS,
    **_functions.CONVERTERS,
    **_files.CONVERTERS,
    **_web.CONVERTERS,
    **_code.CONVERTERS,
    **_mcp.CONVERTERS,
    **_shell.CONVERTERS,
    **_computer.CONVERTERS,
    **_images.CONVERTERS,
    **_custom.CONVERTERS,
})
"""The built-in converters."""


def _as_converter(kind: str, value: object) -> ItemConverter:
    if isinstance(value, ItemConverter):
        return value
    if callable(value):
        return ItemConverter(value)
    raise TypeError(f"the converter for item type {kind!r} must be an ItemConverter or a function, "
                    f"not {type(value).__name__}")


def _accept(name: str, value: Any) -> Mapping[str, ItemConverter]:
    """What an entry point named `name` loaded: a converter for that item type, or a mapping of them."""
    table = value.items() if isinstance(value, Mapping) else [(name, value)]
    return {str(kind): _as_converter(str(kind), item) for kind, item in table}


PLUGINS: Kind[ItemConverter] = Kind("converter", ENTRY_POINT_GROUP, lambda: REGISTRY, _accept)
"""Converters from other packages (`tlmscore.converters` entry points)."""


def plugin_converters() -> Mapping[str, ItemConverter]:
    """The converters installed packages add in the `tlmscore.converters` entry-point group.

    Read once per process (installed packages do not change while it runs). An entry point that
    fails to load, loads something that is not a converter, or names a built-in item type, is
    skipped with a warning.
    """
    return plugins(PLUGINS)


@functools.cache
def _installed() -> Mapping[str, ItemConverter]:
    return MappingProxyType({**REGISTRY, **plugin_converters()})


def converters(extra: Mapping[str, ConverterLike] | None = None) -> Mapping[str, ItemConverter]:
    """The converters a conversion uses: built-in, then installed plug-ins, then `extra`; later ones win."""
    if not extra:
        return _installed()
    return MappingProxyType({**_installed(), **{kind: _as_converter(kind, v) for kind, v in extra.items()}})

