"""The library's calls on a batch held in memory: `prepare` and `score` as DataFrames, `aiter_rows` as rows.

Each is the pipeline's chunks (`_stages.aiter_chunks`) collected: `prepare` is `score` without a
scorer. The async forms run in the caller's event loop (a notebook, a service); the plain ones run
one of their own (on a thread when a loop is already running, as in Jupyter).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlmscore.convert.registry import ConverterLike
from tlmscore.evidence.page import PageSource
from tlmscore.ingest import Inputs
from tlmscore.output import Row
from tlmscore.pipeline._stages import Progress, aiter_chunks, run_sync
from tlmscore.scoring.base import Scorer, get_scorer
from tlmscore.settings import Settings

if TYPE_CHECKING:
    import pandas as pd

Pages = PageSource | str | Path | Sequence[str | Path]
"""What `pages=` takes: a `PageSource`, or page-record files and folders (what `--pages` takes)."""


def _with_pages(settings: Settings, pages: Pages | None) -> tuple[Settings, PageSource | None]:
    """The run's settings and page source for `pages=`: files join `settings.page_files`, a source is used as is."""
    if pages is None:
        return settings, None
    paths = [pages] if isinstance(pages, (str, Path)) else pages
    if isinstance(paths, Sequence) and all(isinstance(p, (str, Path)) for p in paths):
        return settings.model_copy(update={"page_files": (*settings.page_files, *map(Path, paths))}), None
    if callable(getattr(pages, "pages_as_done", None)):
        return settings, pages  # type: ignore[return-value]  # a PageSource (a protocol, checked by its method)
    raise TypeError(f"pages=: expected a PageSource, or page-record files and folders (what --pages takes), "
                    f"not {type(pages).__name__}")


def _scorer(scorer: str | Scorer | None, options: Mapping[str, Any] | None) -> Scorer | None:
    return get_scorer(scorer, options) if isinstance(scorer, str) else scorer


async def aiter_rows(source: Inputs, settings: Settings | None = None, *,
                     scorer: str | Scorer | None = None, options: Mapping[str, Any] | None = None,
                     pages: Pages | None = None, progress: Progress | None = None,
                     converters: Mapping[str, ConverterLike] | None = None) -> AsyncIterator[Row]:
    """Every row, in input order, as soon as its chunk is done; scored when `scorer` is given.

    Each is a final `Row` (a read-only mapping of its columns; `to_record()` gives it as a dict).
    The async form of `prepare` and `score` for code already inside an event loop (a notebook, a
    service): nothing is run on a loop of its own.
    """
    chosen = _scorer(scorer, options)
    settings, given = _with_pages(settings or Settings(), pages)
    async with aclosing(aiter_chunks(source, settings, pages=given, progress=progress, scorer=chosen,
                                     converters=converters)) as chunks:
        async for rows in chunks:
            for row in rows:
                yield row


def frame(rows: Iterable[Row], columns: Sequence[str] = Row.columns()) -> pd.DataFrame:
    """Rows as a DataFrame, columns in the rows' order; with no rows, the `columns` alone."""
    import pandas as pd  # noqa: PLC0415  (the command line never builds a DataFrame; it starts faster)

    records = [row.to_record() for row in rows]
    made: pd.DataFrame = pd.DataFrame(records) if records else pd.DataFrame({name: [] for name in columns})
    return made


async def ascore(source: Inputs, scorer: str | Scorer | None = "grounding", settings: Settings | None = None, *,
                 options: Mapping[str, Any] | None = None, pages: Pages | None = None,
                 progress: Progress | None = None,
                 converters: Mapping[str, ConverterLike] | None = None) -> pd.DataFrame:
    """`score`, awaited in the caller's event loop (`scorer=None`: `prepare`)."""
    rows = [row async for row in aiter_rows(source, settings, scorer=scorer, options=options, pages=pages,
                                            progress=progress, converters=converters)]
    return frame(rows, Row.columns(scored=scorer is not None))


async def aprepare(source: Inputs, settings: Settings | None = None, *, pages: Pages | None = None,
                   progress: Progress | None = None,
                   converters: Mapping[str, ConverterLike] | None = None) -> pd.DataFrame:
    """`prepare`, awaited in the caller's event loop."""
    return await ascore(source, None, settings, pages=pages, progress=progress, converters=converters)


def prepare(source: Inputs, settings: Settings | None = None, *, pages: Pages | None = None,
            progress: Progress | None = None, converters: Mapping[str, ConverterLike] | None = None) -> pd.DataFrame:
    """One row per input record, in input order, with the rendered prompt and response.

    `pages` takes the place of the cache and the web when it is a `PageSource` (e.g. `MemoryPages`
    in tests or audits of saved evidence); page-record files or folders (what `--pages` takes) are read
    first, before the cache and the web, as `settings.page_files` are (see `tlmscore.evidence.layers`).
    `converters` adds or replaces item converters by item type. Inside a running event loop,
    `await aprepare(...)` does the same without a thread.
    """
    return run_sync(lambda: aprepare(source, settings, pages=pages, progress=progress, converters=converters))


def score(source: Inputs, scorer: str | Scorer = "grounding", settings: Settings | None = None, *,
          options: Mapping[str, Any] | None = None, pages: Pages | None = None,
          progress: Progress | None = None, converters: Mapping[str, ConverterLike] | None = None) -> pd.DataFrame:
    """`prepare`, plus the columns `scorer`, `score`, `explanation` and `details`.

    `scorer` is a registered name (`grounding`, `tlm`, `judge`) set up with `options`, or a
    `Scorer` object. Problems a scorer can see before work starts (a missing key) raise
    `ScorerError` at once; failures on single rows become those rows' errors. Inside a running
    event loop, `await ascore(...)` does the same without a thread.
    """
    chosen = _scorer(scorer, options)  # a missing key is reported here, before any work
    return run_sync(lambda: ascore(source, chosen, settings, pages=pages, progress=progress, converters=converters))
