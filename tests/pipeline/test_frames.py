"""`prepare`, `score` and their async forms: the same rows, and the async API runs in the caller's event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

import tlmscore
from tests.support.paths import FIXTURES
from tlmscore import MemoryPages, Page, Settings
from tlmscore.evidence.page import AsOf

DEMO = FIXTURES / "demo.jsonl"


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
