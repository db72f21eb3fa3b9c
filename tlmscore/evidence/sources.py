"""The page source a run uses: saved page records first, then the cache and the network."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path

from tlmscore.errors import ConfigError
from tlmscore.evidence.fetch import Fetcher
from tlmscore.evidence.page import MemoryPages, Page, PageSource, in_given_order, pages_as_done
from tlmscore.settings import Settings

__all__ = ["LayeredPages", "load_page_records", "open_page_source"]


def _page(text: str, where: str) -> Page:
    try:
        return Page.from_record(json.loads(text))
    except (json.JSONDecodeError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{where}: not a page record: {exc}") from exc


def load_page_records(path: Path) -> list[Page]:
    """Page records (DESIGN §3.3) from a JSONL file, one per line, or a folder of `*.json` files."""
    try:
        if path.is_dir():
            return [_page(p.read_text(encoding="utf-8"), str(p)) for p in sorted(path.glob("*.json"))]
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read page records: {exc.strerror}") from exc
    return [_page(line, f"{path}:{n}") for n, line in enumerate(lines, start=1) if line.strip()]


class LayeredPages:
    """Pages from `first` where it has them (status not `offline_miss`), the rest from `then`."""

    def __init__(self, first: MemoryPages, then: PageSource) -> None:
        self._first = first
        self._then = then

    async def pages(self, urls: Sequence[str]) -> dict[str, Page]:
        """One page per URL."""
        return await in_given_order(self.pages_as_done(urls), urls)

    async def pages_as_done(self, urls: Sequence[str]) -> AsyncGenerator[tuple[str, Page], None]:
        """`(url, page)` per URL: the saved ones at once, the others as `then` gets them."""
        missing: list[str] = []
        for url, page in (await self._first.pages(urls)).items():
            if page.status == "offline_miss":
                missing.append(url)
            else:
                yield url, page
        if missing:
            async with aclosing(pages_as_done(self._then, missing)) as rest:
                async for item in rest:
                    yield item


@asynccontextmanager
async def open_page_source(settings: Settings,
                           progress: Callable[[str, int, int | None], None] | None = None,
                           ) -> AsyncIterator[PageSource]:
    """The run's page source: `settings.page_files`, then the cache, then (unless offline) the web."""
    saved = [page for path in settings.page_files for page in load_page_records(Path(path))]
    async with Fetcher(settings, progress=progress) as fetcher:
        yield LayeredPages(MemoryPages(saved), fetcher) if saved else fetcher
