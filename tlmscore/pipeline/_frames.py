"""The library's calls on a batch held in memory: `prepare` and `score` as DataFrames, `aiter_rows` as rows.

Each is the run of `_run` with no output file: a `Job` on the `Local` engine, its chunks collected
(`prepare` is `score` without a scorer). The async forms run in the caller's event loop (a notebook,
a service); the plain ones run one of their own (on a thread when a loop is already running, as in
Jupyter). `read_transcripts` gives the records alone, each file read by its store's reader.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import aclosing
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlmscore.convert.registry import ConverterLike
from tlmscore.evidence.page import PageSource
from tlmscore.ingest import BatchInputs, Inputs, read_located
from tlmscore.model import Transcript
from tlmscore.output import Row
from tlmscore.pipeline._run import Job, Local, load_calibration
from tlmscore.pipeline._stages import Progress, run_sync
from tlmscore.scoring.base import Scorer, get_scorer
from tlmscore.settings import Settings
from tlmscore.stores import find_reader

if TYPE_CHECKING:
    import pandas as pd

    from tlmscore.scoring.calibration import Calibration

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


def _job(source: Inputs, scorer: str | Scorer | None, settings: Settings | None, *,
         calibration: Calibration | str | Path | None, pages: Pages | None, progress: Progress | None,
         converters: Mapping[str, ConverterLike] | None) -> Job:
    """The run of `prepare` or `score` (a built scorer, no output file), checked before any work."""
    settings, given = _with_pages(settings or Settings(), pages)
    if isinstance(calibration, (str, Path)):
        calibration = load_calibration(calibration)
    job = Job(source, None, settings, scorer, calibration=calibration if scorer is not None else None,
              command="score" if scorer is not None else "prepare", progress=progress, pages=given,
              converters=converters)
    _ = job.built  # a calibration fitted for another scorer is refused here, before any work
    return job


async def aiter_rows(source: Inputs, settings: Settings | None = None, *,
                     scorer: str | Scorer | None = None, options: Mapping[str, Any] | None = None,
                     pages: Pages | None = None, progress: Progress | None = None,
                     converters: Mapping[str, ConverterLike] | None = None,
                     calibration: Calibration | str | Path | None = None) -> AsyncIterator[Row]:
    """Every row, in input order, as soon as its chunk is done; scored when `scorer` is given.

    Each is a final `Row` (a read-only mapping of its columns; `to_record()` gives it as a dict).
    The async form of `prepare` and `score` for code already inside an event loop (a notebook, a
    service): nothing is run on a loop of its own. `calibration` (a `Calibration` fitted for the
    scorer, or the file `tlmscore calibrate` saved it in) adds `calibrated_score`.
    """
    job = _job(source, _scorer(scorer, options), settings, calibration=calibration, pages=pages,
               progress=progress, converters=converters)
    async with aclosing(Local().chunks(job)) as chunks:
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
                 progress: Progress | None = None, converters: Mapping[str, ConverterLike] | None = None,
                 calibration: Calibration | str | Path | None = None) -> pd.DataFrame:
    """`score`, awaited in the caller's event loop (`scorer=None`: `prepare`)."""
    job = _job(source, _scorer(scorer, options), settings, calibration=calibration, pages=pages,
               progress=progress, converters=converters)
    async with aclosing(Local().chunks(job)) as chunks:
        rows = [row async for made in chunks for row in made]
    return frame(rows, job.columns())


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
          progress: Progress | None = None, converters: Mapping[str, ConverterLike] | None = None,
          calibration: Calibration | str | Path | None = None) -> pd.DataFrame:
    """`prepare`, plus the columns `scorer`, `score`, `explanation` and `details`.

    `scorer` is a registered name (`grounding`, `tlm`, `judge`) set up with `options`, or a
    `Scorer` object. Problems a scorer can see before work starts (a missing key) raise
    `ScorerError` at once; failures on single rows become those rows' errors. `calibration` (a
    `Calibration` fitted for the scorer, or the file `tlmscore calibrate` saved it in) adds
    `calibrated_score`. Inside a running event loop, `await ascore(...)` does the same without a thread.
    """
    chosen = _scorer(scorer, options)  # a missing key is reported here, before any work
    return run_sync(lambda: ascore(source, chosen, settings, pages=pages, progress=progress, converters=converters,
                                   calibration=calibration))


def read_transcripts(source: Inputs, *, batch_inputs: Sequence[str | Path] | BatchInputs = (),
                     fmt: str | None = None) -> Iterator[Transcript]:
    """Every record of `source` as a `Transcript`, lazily, in order; bad records carry `error`.

    `source` is a path, a live source's address (`phoenix://HOST:PORT/PROJECT`), a list of those,
    a record dict, an SDK `Response`, or an iterable of those. A span export or trace store yields
    one record per LLM span (see `tlmscore.stores`); `fmt` forces a source reader by name.
    `batch_inputs` are OpenAI Batch API input files: output lines get their request from the input
    line with the same `custom_id`. A file that cannot be read at all raises `TranscriptError`. A
    record with no id of its own gets `<file>:<line>`, the file named relative to the inputs
    (`input_names`), so the same logs read from another folder give the same ids.
    """
    for _, transcript in read_located(source, batch_inputs=batch_inputs, find=partial(find_reader, fmt=fmt)):
        yield transcript
