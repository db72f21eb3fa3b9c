"""The converter registry, keyed on `item["type"]`; each family module contributes its types."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tlmscore.convert import code, computer, custom, files, functions, images, mcp, messages, shell, web
from tlmscore.convert.context import ItemConverter
from tlmscore.convert.outputs import is_item_reference

__all__ = ["REGISTRY", "item_type"]

REGISTRY: Mapping[str, ItemConverter] = MappingProxyType({
    **messages.CONVERTERS,
    **functions.CONVERTERS,
    **files.CONVERTERS,
    **web.CONVERTERS,
    **code.CONVERTERS,
    **mcp.CONVERTERS,
    **shell.CONVERTERS,
    **computer.CONVERTERS,
    **images.CONVERTERS,
    **custom.CONVERTERS,
})


def item_type(item: object) -> str:
    """An item's type, also for the input shapes the API lets leave out `type`.

    A bare `{role, content}` input message counts as a message, a bare `{id}` as an item reference.
    """
    if isinstance(item, dict):
        kind = item.get("type")
        if kind is None and "role" in item:
            return "message"
        if is_item_reference(item):
            return "item_reference"
        return str(kind) if kind is not None else "unknown"
    return "unknown"
