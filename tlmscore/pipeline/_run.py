"""`tlmscore.run`: the library's one run, with everything the command line's run has, on an `Engine`.

A run checks what it can before work starts (the output's format, the calibration's scorer, the
scorer's options and keys, that the scorer's server answers: `ScorerSpec.check_endpoint`), checks
`resume` against the manifest of the run it continues (the inputs, the settings that change rows,
the scorer and its options: on every engine), then asks its engine for the rows of every record
not done yet. The engine hands them over chunk by chunk in input order:
`Local` (the default) makes them in this process, `tlmscore.ray.Engine` on a Ray cluster. The run
saves each chunk to a checkpoint (a killed run loses at most one chunk), hands it to the caller's
`on_rows`, and writes the output file at the end. `calibration` wraps the scorer
(`tlmscore.scoring.calibration.Calibrated`), which adds `calibrated_score`; a scorer whose options
ask for two passes (the judge's Batch API mode, see `ScorerSpec`) first submits every chunk's
requests, then collects them.

`tlmscore.prepare`, `score` and `aiter_rows` are the same run with no output file: a `Job` on the
`Local` engine, its rows handed to the caller as they are made (`Local.chunks`).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable, Container, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tlmscore.convert.registry import ConverterLike
from tlmscore.errors import ConfigError
from tlmscore.evidence.page import PageSource
from tlmscore.ingest import Inputs
from tlmscore.output import Done, Row, RunOutput, build_manifest, describe_file, output_format
from tlmscore.pipeline._stages import Progress, aiter_chunks, run_sync
from tlmscore.scoring.base import Scorer, get_scorer, spec_of
from tlmscore.settings import Settings

if TYPE_CHECKING:
    from tlmscore.scoring.calibration import Calibration

@dataclass(frozen=True)
class RunResult:
    """What a run did: the output written (None: rows only went to `on_rows`), and its row counts."""

    output: Path | None
    rows: int
    """Rows of this run (a resumed run's earlier rows not included)."""
    earlier: int
    """Rows an earlier run had saved, kept in the output (`resume`)."""
    total: int
    """Rows in the output."""


@dataclass(frozen=True)
class Job:
    """One run as it is handed to an engine, checked: what to read, score and write.

    `inputs` are input paths (a run with an output file, whose manifest names them) or, with no
    output, anything `tlmscore.prepare` reads (records in memory too). `pages` takes the place of the
    cache and the web (page files in `settings.page_files` are read first); `converters` adds or
    replaces item converters by item type.
    """

    inputs: Inputs
    output: Path | None
    settings: Settings
    scorer: str | Scorer | None = None
    """A registered name (set up with `options`), a `Scorer`, or None: prepare only."""
    options: Mapping[str, Any] = field(default_factory=dict)
    calibration: Calibration | None = None
    resume: bool = False
    recorded: Mapping[str, Any] = field(default_factory=dict)
    """The options a resumed run must share with the run it continues (the manifest's)."""
    command: str = "prepare"
    on_rows: Callable[[list[Row]], None] | None = None
    progress: Progress | None = None
    on_start: Callable[[int], None] | None = None
    pages: PageSource | None = None
    converters: Mapping[str, ConverterLike] | None = None
    on_earlier: Callable[[Iterable[Row]], None] | None = None

    @functools.cached_property
    def built(self) -> Scorer | None:
        """The run's scorer, built once (with its calibration around it); None: prepare only."""
        if self.scorer is None:
            return None
        built = get_scorer(self.scorer, self.options) if isinstance(self.scorer, str) else self.scorer
        if self.calibration is None:
            return built
        from tlmscore.scoring.calibration import Calibrated  # noqa: PLC0415  (numpy only when calibrating)

        return Calibrated(built, self.calibration)

    @property
    def paths(self) -> tuple[str | Path, ...]:
        """The input paths (or live addresses): what a manifest names and the Ray engine reads."""
        inputs = (self.inputs,) if isinstance(self.inputs, (str, Path)) else self.inputs
        if isinstance(inputs, (tuple, list)) and all(isinstance(i, (str, Path)) for i in inputs):
            return tuple(inputs)
        raise ConfigError("a run with an output file, or on the Ray engine, reads input files or live addresses, "
                          "not records in memory")

    def columns(self) -> tuple[str, ...]:
        """The output's columns, in order."""
        scored = self.scorer is not None
        return Row.columns(scored=scored, calibrated=scored and self.calibration is not None)


Sink = Callable[[list[Row]], None]
"""Where an engine hands each chunk of final rows, in input order."""


@runtime_checkable
class Engine(Protocol):
    """Where a run's rows are made: `Local` (this process) or `tlmscore.ray.Engine` (a Ray cluster)."""

    def rows(self, job: Job, skip: Container[tuple[str, int]], sink: Sink) -> None:
        """Hand the final rows of every input record not in `skip` (`(source, line)`) to `sink`, in input order."""
        ...


class Local:
    """The engine of one machine: the pipeline's chunks, made in this process."""

    def rows(self, job: Job, skip: Container[tuple[str, int]], sink: Sink) -> None:
        """Rows chunk by chunk; a scorer in two passes goes over the inputs twice (submit, then collect).

        The first pass submits every chunk's requests before any chunk waits. The second renders the
        same prompts (same input and cache), so it finds the same requests (by their ids) in the
        batches submitted by the first, and only polls and collects them.
        """
        if isinstance(job.scorer, str) and spec_of(job.scorer).two_passes(job.options):
            submitter = get_scorer(job.scorer, spec_of(job.scorer).submitting(job.options))
            _drain(self.chunks(job, skip, scorer=submitter), lambda rows: None)
        _drain(self.chunks(job, skip), sink)

    def chunks(self, job: Job, skip: Container[tuple[str, int]] = (), *,
               scorer: Scorer | None = None) -> AsyncGenerator[list[Row], None]:
        """The job's rows, one list per chunk in input order, made in the caller's event loop.

        `scorer` takes the place of the job's own (the first of two passes submits with another).
        """
        return aiter_chunks(job.inputs, job.settings, pages=job.pages, progress=job.progress,
                            scorer=scorer if scorer is not None else job.built, skip=skip,
                            converters=job.converters)


def _drain(chunks: AsyncGenerator[list[Row], None], sink: Sink) -> None:
    """Every chunk handed to `sink` as it completes, on an event loop of its own."""
    async def collect() -> None:
        async with aclosing(chunks) as made:
            async for rows in made:
                sink(rows)

    run_sync(collect)


def load_calibration(path: str | Path) -> Calibration:
    from tlmscore.scoring.calibration import load  # noqa: PLC0415  (numpy only when calibrating)

    return load(path)


def _scorer_name(scorer: str | Scorer | None) -> str | None:
    if scorer is None or isinstance(scorer, str):
        return scorer
    return str(getattr(scorer, "name", type(scorer).__name__))


def run(inputs: Sequence[str | Path], output: str | Path | None = None, *, scorer: str | Scorer | None = None,
        options: Mapping[str, Any] | None = None, settings: Settings | None = None, resume: bool = False,
        calibration: Calibration | str | Path | None = None, on_rows: Callable[[list[Row]], None] | None = None,
        progress: Progress | None = None, on_start: Callable[[int], None] | None = None,
        command: str | None = None, engine: Engine | None = None, pages: PageSource | None = None,
        converters: Mapping[str, ConverterLike] | None = None,
        on_earlier: Callable[[Iterable[Row]], None] | None = None) -> RunResult:
    """Prepare (no `scorer`) or score `inputs`, writing the rows to `output` (.jsonl, .csv, .parquet).

    `scorer` is a registered name (with `options`) or a `Scorer`; `calibration` (a
    `tlmscore.scoring.calibration.Calibration` fitted for that scorer, or the file `tlmscore calibrate`
    saved it in) adds `calibrated_score`;
    `resume` continues an interrupted run into the same `output`, after checking that it read the
    same inputs with the same settings. `on_start` is told how many rows an earlier run saved, before
    work starts, and `on_earlier` gets those rows (read back once, as a stream); `on_rows` sees every
    chunk's final `Row`s as it completes. `engine` is where the rows
    are made: `Local()` (the default), or `tlmscore.ray.Engine(...)` on a Ray cluster; output, resume,
    `on_rows` and `on_start` are the same on both. `pages` (a `PageSource`) and `converters` are
    `tlmscore.prepare`'s, on the local engine.
    """
    settings = settings or Settings()
    options = dict(options or {})
    name = _scorer_name(scorer)
    spec = spec_of(scorer) if isinstance(scorer, str) else None
    # what only decides whether or what a scorer pays, not its rows: a run may resume with a higher cost limit
    recorded = spec.recorded(options) if spec is not None else dict(options)
    if isinstance(calibration, (str, Path)):
        recorded["calibration"] = describe_file(calibration)
        calibration = load_calibration(calibration)
    if calibration is not None:
        from tlmscore.scoring.calibration import apply  # noqa: PLC0415

        apply(calibration, [], scorer=name)  # refuses a calibration fitted for another scorer, before work
    engine = engine if engine is not None else Local()
    if (pages is not None or converters) and not isinstance(engine, Local):
        raise ConfigError("pages= and converters= run on the local engine only: another engine's workers read "
                          "page files (settings.page_files) and the built-in converters")
    target = Path(output) if output is not None else None
    if target is not None:
        output_format(target)
    if spec is not None:  # the scorer's own cache beside the page cache
        options = spec.with_cache(options, settings.cache_dir)
    job = Job(tuple(inputs), target, settings, scorer, options, calibration if scorer is not None else None,
              resume, recorded, command or ("score" if scorer is not None else "prepare"), on_rows, progress,
              on_start, pages, converters, on_earlier)
    _ = job.built  # the scorer's options and keys, checked before any file is written
    if spec is not None:
        spec.check_endpoint(options)  # its server answers: a run without network stops here, not row by row
    return _execute(job, engine)


def _execute(job: Job, engine: Engine) -> RunResult:
    """The run around the engine: its output (resume checks, checkpoint), `on_start`, `on_rows`, the output file."""
    output = None
    if job.output is not None:  # its resume checked against the manifest of the run it continues
        manifest = build_manifest(job.command, job.paths, job.settings, scorer=_scorer_name(job.scorer),
                                  scorer_options=job.recorded)
        output = RunOutput(job.output, manifest, resume=job.resume)
    if job.on_start is not None:
        job.on_start(output.earlier if output is not None else 0)
    if job.on_earlier is not None and output is not None and output.earlier:
        job.on_earlier(output.saved())
    written = 0

    def sink(rows: list[Row]) -> None:
        nonlocal written
        if output is not None:
            output.write(rows)
        written += len(rows)
        if job.on_rows is not None:
            job.on_rows(rows)

    engine.rows(job, output.skip if output is not None else Done(), sink)
    if output is None:
        return RunResult(None, written, 0, written)
    total = output.finish(job.settings.chunk_size, job.columns())
    return RunResult(job.output, written, output.earlier, total)
