"""The converter registry, keyed on `item["type"]`; each family module contributes its types."""

from __future__ import annotations

from collections.abc import Mapping

from tlmscore.convert import files, functions, messages, web
from tlmscore.convert.context import ItemConverter

__all__ = ["REGISTRY", "item_type"]

REGISTRY: Mapping[str, ItemConverter] = {
    **messages.CONVERTERS,
    **functions.CONVERTERS,
    **files.CONVERTERS,
    **web.CONVERTERS,
}


def item_type(item: object) -> str:
    """An item's type; a bare `{role, content}` input message counts as a message."""
    if isinstance(item, dict):
        kind = item.get("type")
        if kind is None and "role" in item:
            return "message"
        return str(kind) if kind is not None else "unknown"
    return "unknown"
