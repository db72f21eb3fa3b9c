"""The page source a run uses, composed in layers with a fixed order.

A run reads each page from the first layer that has it (a layer "has" a page unless it answers
`offline_miss`):

1. the page records of `settings.page_files` (`--pages`), in the order given;
2. the source the caller passed (`prepare(..., pages=...)`), when there is one; otherwise
3. the fetcher: the cache, then the web (never the web when `settings.offline`), with a web
   archive as `settings.archive` says (`archive.ArchivePages`);
4. with `settings.page_source` `chat`, a model reading the pages 2 or 3 could not give
   (`_chat_pages.ChatPages`); with `chat:always`, the model reads every page instead of 2 and 3.

A caller's source takes the place of the fetcher rather than going in front of it, so a test or
an audit with `MemoryPages` never reaches the network; to put one in front of the cache and the
web, compose explicitly: `LayeredPages(MemoryPages(...), Fetcher(settings))`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from pathlib import Path

from tlmscore.errors import ConfigError
from tlmscore.evidence.page import AsOf, MemoryPages, Page, PageSource, pages_as_done
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


class LayeredPages(PageSource):
    """Pages from the first of `layers` that has them (status not `offline_miss`), in order.

    A URL no layer has gets the last layer's answer. Each layer is asked only for what the
    layers before it lacked; a layer that streams hands its pages over as they are ready.
    """

    def __init__(self, first: PageSource, *then: PageSource) -> None:
        self._layers = (first, *then)

    async def pages_as_done(self, urls: Sequence[str],
                            as_of: AsOf | None = None) -> AsyncGenerator[tuple[str, Page], None]:
        """`(url, page)` per URL, from the first layer that has it."""
        missing = list(urls)
        for depth, layer in enumerate(self._layers):
            if not missing:
                return
            last = depth == len(self._layers) - 1
            still: list[str] = []
            async with aclosing(pages_as_done(layer, missing, as_of)) as found:
                async for url, page in found:
                    if page.status == "offline_miss" and not last:
                        still.append(url)
                    else:
                        yield url, page
            missing = still


async def _fetching(stack: AsyncExitStack, settings: Settings,
                    progress: Callable[[str, int, int | None], None] | None) -> PageSource:
    """The cache and the web (a `Fetcher` kept open on `stack`), with the archive as `settings.archive` says."""
    # Imported here: a run given its own source never loads the network stack.
    from tlmscore.evidence._archive import ArchivePages  # noqa: PLC0415
    from tlmscore.evidence.fetch import Fetcher  # noqa: PLC0415

    fetcher = await stack.enter_async_context(Fetcher(settings, progress=progress))
    return fetcher if settings.archive == "off" else ArchivePages(fetcher, settings)


@asynccontextmanager
async def open_page_source(settings: Settings,
                           progress: Callable[[str, int, int | None], None] | None = None,
                           given: PageSource | None = None) -> AsyncIterator[PageSource]:
    """The run's page source: `settings.page_files`, then `given` or else the cache, web and archive.

    With `settings.page_source` `chat`, a model reads what those could not give; with `chat:always`
    it reads every page not in `page_files`, and `given` may not be passed.
    """
    saved = [page for path in settings.page_files for page in load_page_records(Path(path))]
    always = settings.page_source == "chat:always"
    if always and given is not None:
        raise ConfigError("page_source 'chat:always' reads every page with the page model: "
                          "pass no page source of your own with it")
    async with AsyncExitStack() as stack:
        origin = None if always else given if given is not None else await _fetching(stack, settings, progress)
        if origin is None or settings.page_source != "fetch":
            from tlmscore.evidence._chat_pages import ChatPages  # noqa: PLC0415  (openai only when asked for)

            origin = await stack.enter_async_context(ChatPages(origin, settings))
        yield LayeredPages(MemoryPages(saved), origin) if saved else origin
