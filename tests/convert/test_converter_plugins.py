"""Converter plug-ins: an item type no converter knows is shown generically, an entry point's converter is used,
and converters the caller passes win."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.support.dists import install
from tlmscore import MemoryPages, Settings
from tlmscore.convert import registry
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import ToolCall, ToolResult, Turn
from tlmscore.plugins import forget

LOOKUP = {"type": "acme_lookup", "id": "al_1", "sku": "X-100", "result": {"stock": 7}}


PLUGIN = '''
from tlmscore.convert.context import ItemConverter
from tlmscore.model import ToolCall, ToolResult


def convert(item, ctx):
    return [ToolCall(name="acme_lookup", arguments={"sku": item["sku"]}, call_id=item["id"], server=True),
            ToolResult(name="acme_lookup", call_id=item["id"], output=item["result"])]


CONVERTER = ItemConverter(convert)
'''


def lookup_record() -> dict[str, Any]:
    return {"id": "acme", "request": {"input": "Is X-100 in stock?"},
            "response": {"id": "resp_acme", "object": "response", "output": [
                LOOKUP, {"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": "Yes, 7 are in stock."}]}]}}


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """Entry points are read once per process; a test that installs one reads them again, before and after."""
    forget()
    registry._installed.cache_clear()
    yield
    forget()
    registry._installed.cache_clear()


def install_plugin(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution declaring a converter in the `tlmscore.converters` group."""
    install(root, "acme_conv", PLUGIN, "[tlmscore.converters]\nacme_lookup = acme_conv:CONVERTER\n")
    monkeypatch.syspath_prepend(str(root))


def test_unknown_item_type_is_generic_without_a_plugin(fresh_registry: None) -> None:
    df = tlmscore.prepare([lookup_record()], Settings(offline=True), pages=MemoryPages())
    assert any("unhandled item type 'acme_lookup'" in w for w in df.warnings[0])


def test_a_converter_plugin_from_an_entry_point_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        fresh_registry: None) -> None:
    install_plugin(tmp_path, monkeypatch)
    assert "acme_lookup" in registry.plugin_converters()
    df = tlmscore.prepare([lookup_record()], Settings(offline=True), pages=MemoryPages())
    assert list(df.warnings[0]) == []
    assert '"sku": "X-100"' in df.prompt[0] and '"stock": 7' in df.prompt[0]


def test_converters_passed_by_the_caller_win(fresh_registry: None) -> None:
    def convert(item: dict[str, Any], ctx: Context) -> list[Turn]:
        return [ToolCall(name="stock_check", arguments={"sku": item["sku"]}, call_id="c1"),
                ToolResult(name="stock_check", call_id="c1", output="seven")]

    df = tlmscore.prepare([lookup_record()], Settings(offline=True), pages=MemoryPages(),
                          converters={"acme_lookup": ItemConverter(convert)})
    assert "stock_check" in df.prompt[0] and "seven" in df.prompt[0]
    bare = tlmscore.prepare([lookup_record()], Settings(offline=True), pages=MemoryPages(),
                            converters={"acme_lookup": convert})
    assert bare.prompt[0] == df.prompt[0]
    with pytest.raises(TypeError, match="acme_lookup"):
        registry.converters({"acme_lookup": 42})  # type: ignore[dict-item]
