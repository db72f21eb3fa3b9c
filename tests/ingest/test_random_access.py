"""Seams a library user needs: converter plug-ins, the async API, `.gz` random access, a lazy pytest plugin."""

from __future__ import annotations

import asyncio
import gzip
import json
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tlmscore
from tests.support.paths import FIXTURES
from tlmscore import MemoryPages, Page, Settings
from tlmscore.convert import registry
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.evidence.page import AsOf
from tlmscore.ingest._batch_api import BatchInputs
from tlmscore.ingest._logfile import RandomAccess, lines
from tlmscore.model import ToolCall, ToolResult, Turn
from tlmscore.plugins import loaded

DEMO = FIXTURES / "demo.jsonl"
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
    loaded.cache_clear()
    registry._installed.cache_clear()
    yield
    loaded.cache_clear()
    registry._installed.cache_clear()


def install_plugin(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution declaring a converter in the `tlmscore.converters` group."""
    (root / "acme_conv.py").write_text(PLUGIN, encoding="utf-8")
    info = root / "acme_conv-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-conv\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[tlmscore.converters]\nacme_lookup = acme_conv:CONVERTER\n",
                                           encoding="utf-8")
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


def test_async_prepare_and_score_equal_the_sync_ones(tmp_path: Path) -> None:
    settings = Settings(offline=True, cache_dir=tmp_path, page_files=(FIXTURES / "pages",))
    sync_rows = tlmscore.prepare(DEMO, settings)
    assert sync_rows.n_urls_ok.sum() > 0
    async_rows = asyncio.run(tlmscore.aprepare(DEMO, settings))
    pd.testing.assert_frame_equal(sync_rows, async_rows)
    sync_scores = tlmscore.score(DEMO, settings=settings)
    async_scores = asyncio.run(tlmscore.ascore(DEMO, settings=settings))
    pd.testing.assert_frame_equal(sync_scores, async_scores)

    async def collect() -> list[dict[str, Any]]:
        return [row async for row in tlmscore.aiter_rows(DEMO, settings, scorer="grounding")]

    streamed = asyncio.run(collect())
    assert [r["id"] for r in streamed] == list(sync_scores.id)
    assert [r["prompt"] for r in streamed] == [None if pd.isna(p) else p for p in sync_scores.prompt]
    assert [r["score"] for r in streamed if r["score"] == r["score"]] == list(sync_scores.score.dropna())


class ThreadNoting(MemoryPages):
    """Pages served while noting which thread asked for them."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    async def pages(self, urls: Sequence[str], as_of: AsOf | None = None) -> dict[str, Page]:
        self.threads.add(threading.get_ident())
        return await super().pages(urls, as_of)


def test_the_async_api_runs_in_the_callers_loop(tmp_path: Path) -> None:
    source = ThreadNoting()

    async def main() -> tuple[int, pd.DataFrame]:
        return threading.get_ident(), await tlmscore.aprepare(DEMO, Settings(offline=True, cache_dir=tmp_path),
                                                              pages=source)

    loop_thread, df = asyncio.run(main())
    assert len(df) == 17 and df.n_urls.sum() > 0
    assert source.threads == {loop_thread}


def test_random_access_into_gz_decompresses_once(tmp_path: Path) -> None:
    packed = tmp_path / "log.jsonl.gz"
    data = b"".join(json.dumps({"n": i, "pad": "x" * (i % 50)}).encode() + b"\n" for i in range(2000))
    packed.write_bytes(gzip.compress(data))
    offsets = {number: offset for number, offset, _ in lines(packed)}
    with RandomAccess() as files:
        assert json.loads(files.line(packed, offsets[1500]))["n"] == 1499
        packed.unlink()  # later lookups must not go back to the compressed file
        for number in (2000, 3, 999, 1):
            assert json.loads(files.line(packed, offsets[number]))["n"] == number - 1


def test_batch_inputs_in_gz_are_joined_without_rereading(tmp_path: Path) -> None:
    inputs = tmp_path / "in.jsonl.gz"
    inputs.write_bytes(gzip.compress(b"".join(
        json.dumps({"custom_id": f"c{i}", "method": "POST", "url": "/v1/responses",
                    "body": {"model": "m", "input": f"question {i}"}}).encode() + b"\n" for i in range(500))))
    batch = BatchInputs([inputs])
    try:
        assert batch.request("c250") == {"model": "m", "input": "question 250"}
        inputs.unlink()
        assert [batch.request(f"c{i}")["input"] for i in (499, 0, 7)] == [  # type: ignore[index]
            "question 499", "question 0", "question 7"]
    finally:
        batch.close()


def test_batch_inputs_pickle_as_their_index_and_read_the_files_again(tmp_path: Path) -> None:
    """Sent to another process (the Ray engine's tasks), the index goes along and the files are reopened."""
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"custom_id": f"c{i}", "body": {"input": f"q{i}"}}) + "\n"
                              for i in range(3)), encoding="utf-8")
    batch = BatchInputs([inputs])
    assert batch.request("c1") == {"input": "q1"}  # its file is open now
    copy = pickle.loads(pickle.dumps(batch))  # noqa: S301 -- our own bytes
    batch.close()
    inputs.write_text(inputs.read_text(encoding="utf-8").replace("q2", "Q2"), encoding="utf-8")
    assert len(copy) == 3 and copy.request("c2") == {"input": "Q2"}  # read again, from the same path
    copy.close()


def test_chains_across_a_gz_file(tmp_path: Path) -> None:
    """Chains look records up in a gzipped file through the same reader as the batch."""
    plain = [FIXTURES / "chain_a.jsonl", FIXTURES / "chain_b.jsonl"]
    expected = tlmscore.prepare([str(p) for p in plain], Settings(offline=True, cache_dir=tmp_path),
                                pages=MemoryPages())
    packed = []
    for path in plain:
        target = tmp_path / (path.name + ".gz")
        target.write_bytes(gzip.compress(path.read_bytes()))
        packed.append(str(target))
    got = tlmscore.prepare(packed, Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    assert list(got.prompt) == list(expected.prompt)
    assert list(got.history_complete) == list(expected.history_complete)


def test_the_pytest_plugin_imports_nothing_of_tlmscore_in_other_projects(tmp_path: Path) -> None:
    """Only the package (with the helper that defers its names) and the plugin are loaded, no stage."""
    (tmp_path / "test_other.py").write_text(
        "import sys\n\n\ndef test_nothing_of_tlmscore_is_loaded():\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith('tlmscore'))\n"
        "    assert loaded == ['tlmscore', 'tlmscore._lazy', 'tlmscore.pytest_plugin'], loaded\n"
        "    assert 'pydantic' not in sys.modules or 'tlmscore.settings' not in sys.modules\n", encoding="utf-8")
    # The other project's folder has no pytest configuration: the plug-ins of arize-phoenix-client and
    # langsmith, which load their packages (seconds of CPU), are left out as the project's own configuration does.
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:phoenix",
                           "-p", "no:langsmith_plugin", "test_other.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
