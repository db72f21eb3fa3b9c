"""`tlmscore.run`: the library's one run, with everything the command line's run has.

A run reads its inputs chunk by chunk and hands each chunk's rows to the caller's `on_rows`; with
an `output` it also saves them to a checkpoint as they complete (a killed run loses at most one
chunk), checks `resume` against the manifest of the run it continues, and writes the output file
at the end. `calibration` adds `calibrated_score` to scored rows; a judge in Batch API mode
(`options={"batch": True, ...}`) first submits every chunk's requests, then collects them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tlmscore.output import Checkpoint, Row, build_manifest, describe_file, output_format, start_run
from tlmscore.pipeline._run import Progress, run_batch
from tlmscore.scoring.base import Scorer, get_scorer
from tlmscore.settings import Settings

if TYPE_CHECKING:
    from tlmscore.scoring.calibration import Calibration

Rows = list[dict[str, Any]]


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


def _with_calibrated(rows: Rows, calibration: Calibration, scorer: str) -> None:
    """Add `calibrated_score` to scored rows in place (NaN where `score` is NaN)."""
    from tlmscore.scoring.calibration import apply  # noqa: PLC0415  (numpy only when calibrating)

    scores = [float(v) if isinstance(v := r.get("score"), (int, float)) else math.nan for r in rows]
    for row, value in zip(rows, apply(calibration, scores, scorer=scorer).tolist(), strict=True):
        row["calibrated_score"] = value


def _load_calibration(path: str | Path) -> Calibration:
    from tlmscore.scoring.calibration import load  # noqa: PLC0415  (numpy only when calibrating)

    return load(path)


_SPENDING_OPTIONS = frozenset({"cache", "cache_dir", "price_in", "price_out", "max_cost"})


def _scorer_name(scorer: str | Scorer | None) -> str | None:
    if scorer is None or isinstance(scorer, str):
        return scorer
    return str(getattr(scorer, "name", type(scorer).__name__))


def _submit_ahead(inputs: Sequence[str | Path], settings: Settings, scorer: str, options: Mapping[str, Any],
                  skip: set[tuple[str, int]]) -> None:
    """A judge in Batch API mode, first pass: every chunk's requests are submitted before any chunk waits.

    The second pass renders the same prompts (same input and cache), so it finds the same
    custom_ids in the batches submitted here and only polls and collects them.
    """
    submitter = get_scorer(scorer, {**options, "batch_submit_only": True})
    run_batch(list(inputs), settings, lambda rows: None, scorer=submitter, skip=skip)


def run(inputs: Sequence[str | Path], output: str | Path | None = None, *, scorer: str | Scorer | None = None,
        options: Mapping[str, Any] | None = None, settings: Settings | None = None, resume: bool = False,
        calibration: Calibration | str | Path | None = None, on_rows: Callable[[list[Row]], None] | None = None,
        progress: Progress | None = None, on_start: Callable[[int], None] | None = None,
        command: str | None = None) -> RunResult:
    """Prepare (no `scorer`) or score `inputs`, writing the rows to `output` (.jsonl, .csv, .parquet).

    `scorer` is a registered name (with `options`) or a `Scorer`; `calibration` (a
    `tlmscore.scoring.calibration.Calibration` fitted for that scorer, or the file `tlmscore calibrate`
    saved it in) adds `calibrated_score`;
    `resume` continues an interrupted run into the same `output`, after checking that it read the
    same inputs with the same settings. `on_start` is told how many rows an earlier run saved, before
    work starts; `on_rows` sees every chunk's final `Row`s as it completes.
    """
    settings = settings or Settings()
    options = dict(options or {})
    name = _scorer_name(scorer)
    # what only decides whether or what a judge pays, not its rows: a run may resume with a higher --max-cost
    recorded = {k: v for k, v in options.items() if name != "judge" or k not in _SPENDING_OPTIONS}
    if isinstance(calibration, (str, Path)):
        recorded["calibration"] = describe_file(calibration)
        calibration = _load_calibration(calibration)
    if calibration is not None:
        from tlmscore.scoring.calibration import apply  # noqa: PLC0415

        apply(calibration, [], scorer=name)  # refuses a calibration fitted for another scorer, before work
    target = Path(output) if output is not None else None
    if target is not None:
        output_format(target)
    if scorer == "judge" and "cache_dir" not in options:  # the verdict cache beside the page cache
        options["cache_dir"] = str(settings.cache_dir / "judge")
    the_scorer = get_scorer(scorer, options) if isinstance(scorer, str) else scorer
    checkpoint, skip = _start(inputs, target, settings, name, recorded, resume=resume,
                              command=command or ("score" if scorer is not None else "prepare"))
    written = 0
    if on_start is not None:
        on_start(len(checkpoint.done) if checkpoint is not None else 0)

    def sink(rows: Rows) -> None:
        nonlocal written
        if calibration is not None and name is not None:
            _with_calibrated(rows, calibration, name)
        final = [Row.from_record(row) for row in rows]  # scored and calibrated: nothing changes them now
        if checkpoint is not None:
            checkpoint.write(final)
        written += len(final)
        if on_rows is not None:
            on_rows(final)

    if isinstance(scorer, str) and options.get("batch") and not options.get("batch_submit_only"):
        _submit_ahead(inputs, settings, scorer, options, skip)
    run_batch(list(inputs), settings, sink, progress=progress, scorer=the_scorer, skip=skip)
    if checkpoint is None:
        return RunResult(None, written, 0, written)
    columns = Row.columns(scored=scorer is not None, calibrated=scorer is not None and calibration is not None)
    total = checkpoint.finish(settings.chunk_size, columns)
    return RunResult(target, written, len(checkpoint.done), total)


def _start(inputs: Sequence[str | Path], output: Path | None, settings: Settings, scorer: str | None,
           options: Mapping[str, Any], *, resume: bool, command: str) -> tuple[Checkpoint | None, set[tuple[str, int]]]:
    """The checkpoint of a run with an output (after checking `resume` against its manifest) and what to skip."""
    if output is None:
        return None, set()
    manifest = build_manifest(command, inputs, settings, scorer=scorer, scorer_options=options)
    names = start_run(output, manifest, resume=resume)
    checkpoint = Checkpoint(output, resume=resume)
    return checkpoint, {(names.get(source, source), line) for source, line in checkpoint.done}


