"""The `tlmscore` command: parse flags → Settings → one library call → a summary on stderr."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tlmscore._tables import json_cell
from tlmscore.cli._annotate import check_live_inputs, check_targets, report, run_annotate, target_files, write_back
from tlmscore.cli._args import build_parser, command_parser, run_inputs, settings_from_args
from tlmscore.cli._checks import (
    SCORER_FLAGS,
    check_annotate,
    check_cache,
    check_calibrate,
    check_counts,
    check_files,
    check_fixtures_args,
    check_output,
    check_page_model,
    check_pull,
    check_run_paths,
    check_scorer,
    one_line,
)
from tlmscore.cli._compare import run_compare
from tlmscore.cli._judge_server import check_judge_server, run_judge_server
from tlmscore.cli._plugins import run_plugins
from tlmscore.cli._progress import ProgressBars
from tlmscore.cli._ray import ray_engine
from tlmscore.cli._summary import Summary
from tlmscore.cli._watch import run_watch
from tlmscore.errors import ConfigError, TlmscoreError
from tlmscore.evidence.cache import cache_stats, clear_cache
from tlmscore.fixtures import GoldenScoring, check_fixtures, golden_scoring, record_fixtures
from tlmscore.output import checkpoint_path
from tlmscore.pipeline import Engine, Local, run
from tlmscore.settings import Settings, default_cache_dir
from tlmscore.stores import find_reader
from tlmscore.stores.openai import stored_responses

EXIT_OK = 0
EXIT_CHANGED = 1
EXIT_NO_ROWS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""Ctrl-C, as shells report a process SIGINT ended (128 + 2)."""


def _scorer_options(args: argparse.Namespace) -> dict[str, Any]:
    """The scorer's options from its flags and every `--option KEY=VALUE` (VALUE read as JSON if it is)."""
    options = {flag: getattr(args, flag) for flag in SCORER_FLAGS if getattr(args, flag, None) is not None}
    judge_flags = {"cache": False if getattr(args, "no_judge_cache", False) else None,
                   "price_in": getattr(args, "price_in", None), "price_out": getattr(args, "price_out", None),
                   "max_cost": getattr(args, "max_cost", None)}
    given = {key: value for key, value in judge_flags.items() if value is not None}
    if given and getattr(args, "scorer", None) != "judge":
        raise ConfigError("--no-judge-cache, --price-in, --price-out and --max-cost need --scorer judge")
    options |= given
    for item in args.option or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE")
        options[key] = json_cell(value)
    return options


def _judge_batch(args: argparse.Namespace, options: dict[str, Any]) -> dict[str, Any]:
    """With --judge-batch: batch mode, its state folder beside the output unless an option names one."""
    if not getattr(args, "judge_batch", False):
        return options
    if args.scorer != "judge":
        raise ConfigError("--judge-batch needs --scorer judge")
    return {"batch_dir": str(args.output) + ".judge-batch", **options, "batch": True}


@contextlib.contextmanager
def _scorer_log(enabled: bool) -> Iterator[None]:
    """INFO messages (the judge's and the page model's request counts and estimates) as `tlmscore:` lines on stderr."""
    logger = logging.getLogger("tlmscore")
    if not enabled:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("tlmscore: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _check_run(args: argparse.Namespace, *, scoring: bool) -> tuple[dict[str, Any], Settings]:
    """Every path and option of a run checked before work starts; returns the scorer's options and the settings."""
    ray = args.engine == "ray"
    args.inputs = run_inputs(args)
    if ray and any(isinstance(i, str) for i in args.inputs):
        raise ConfigError("live sources: not available with --engine ray yet (read them on one machine)")
    if args.input_format is not None:
        find_reader("", args.input_format)  # an unknown --format: one line, before anything is written
    check_files([p for p in args.inputs if isinstance(p, Path)], what="input")
    check_files(args.batch_input, what="--batch-input")
    check_files(args.pages, what="--pages", folders=True)
    check_output(args.output)
    check_page_model(args)
    if args.hydrate and not ray:
        stored_responses(None, "--hydrate").key()  # no key: one line, before anything is written
    targets = args.annotate if scoring else []
    options: dict[str, Any] = {}
    if scoring:
        options = _scorer_options(args)
        check_scorer(args.scorer, options)
        check_targets(targets, args.inputs, args.input_format)
        if args.calibration is not None:
            check_files([args.calibration], what="--calibration")
    settings = settings_from_args(args)
    check_run_paths(args, settings.cache_dir, target_files(targets))
    check_cache(settings.cache_dir, offline=settings.offline)
    check_counts(args)
    if not ray:
        check_live_inputs(args.inputs, targets)  # a live store that is down or not that store: one line, no output
    return options, settings


def _run(args: argparse.Namespace) -> int:
    """`prepare` and `score`: rows go to a checkpoint as chunks finish, then to the output."""
    scoring = args.command == "score"
    options, settings = _check_run(args, scoring=scoring)
    options = _judge_batch(args, options)
    if args.engine == "ray" and args.hydrate:
        raise ConfigError("--hydrate: not available with --engine ray yet")
    summary = Summary()
    kept = [0]  # rows saved in the checkpoint: an earlier run's, then each chunk's as it is handed on
    back = write_back(args) if scoring and args.annotate else None

    def saved(rows: list[Any]) -> None:
        kept[0] += len(rows)
        summary.add(rows)
        if back is not None:
            back.add(rows)

    def started(earlier: int) -> None:
        kept[0] = earlier
        if earlier:
            print(f"tlmscore: resuming: {earlier} records already done", file=sys.stderr)
        if options.get("batch"):
            print("tlmscore: judge batch: submitting the requests of every chunk before waiting for any",
                  file=sys.stderr)

    reads_pages = settings.page_source != "fetch"  # a model reads pages: its requests and cost are logged too
    try:
        with ProgressBars(enabled=settings.progress) as bars, _scorer_log(scoring or reads_pages), \
                _engine(args, settings) as engine:
            result = run(args.inputs, args.output, scorer=args.scorer if scoring else None, options=options,
                         settings=settings, resume=args.resume, calibration=args.calibration if scoring else None,
                         on_rows=saved, progress=bars.update, on_start=started, command=args.command,
                         engine=engine, on_earlier=back.add if back is not None else None)
    except KeyboardInterrupt:  # Ctrl-C: every chunk finished so far is in the checkpoint, synced
        print(f"tlmscore: interrupted: {kept[0]} rows kept in {checkpoint_path(args.output)}; rerun the same "
              "command with --resume to finish", file=sys.stderr)
        return EXIT_INTERRUPTED
    if not result.earlier:
        _warn_empty(args.inputs, summary)
    print(summary.text(args.output, scored=scoring), file=sys.stderr)
    if back is not None:  # the scores are in OUT already: a failed write-back loses none
        report(back.finish())
    if result.earlier:
        print(f"tlmscore: {result.total} rows in {args.output} ({result.earlier} from the earlier run)",
              file=sys.stderr)
    if summary.rows and summary.errors == summary.rows and not result.earlier:
        print(f"tlmscore: error: no record produced a usable row: all {summary.rows} rows have an error "
              f"(the 'error' column of {args.output} says why)", file=sys.stderr)
        return EXIT_NO_ROWS
    return EXIT_OK


def _engine(args: argparse.Namespace, settings: Settings) -> contextlib.AbstractContextManager[Engine]:
    """Where the rows are made: this process, or a Ray cluster (connected for the run)."""
    if args.engine == "ray":
        return ray_engine(args, progress=bool(settings.progress))
    return contextlib.nullcontext(Local())


def _warn_empty(inputs: Sequence[str | Path], summary: Summary) -> None:
    """A warning for each input that held no record (a run of them writes an output without rows)."""
    for path in inputs:
        if summary.sources.get(str(path), 0) == 0:
            print(f"tlmscore: warning: {path}: no records in this input", file=sys.stderr)


def _calibrate(args: argparse.Namespace) -> int:
    from tlmscore.cli._calibrate import run_calibrate  # noqa: PLC0415  (numpy only when calibrating)

    return run_calibrate(args)


def _pull(args: argparse.Namespace) -> int:
    """Stored responses by id into transcript records; an id that cannot be pulled is an error record."""
    import asyncio  # noqa: PLC0415  (only this command runs a loop of its own here)

    from tlmscore.stores.openai import pull_to_file, read_ids  # noqa: PLC0415

    if args.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    ids = [rid for given in args.ids for rid in read_ids(given, args.column)]
    client = stored_responses(args.base_url, "pull").client(timeout=600.0, retries=2)  # the SDK's timeout, retries

    async def pull() -> tuple[int, int]:
        async with client:
            return await pull_to_file(client, ids, args.output, concurrency=args.concurrency, resume=args.resume)

    written, errors = asyncio.run(pull())
    if errors and errors == written:  # not one response: a wrong key, base URL or id list, not a few expired ids
        print(f"tlmscore: error: none of the {errors} ids could be pulled (the error records in {args.output} "
              "say why)", file=sys.stderr)
        return EXIT_NO_ROWS
    print(f"tlmscore: pulled {written - errors} stored responses into {args.output}"
          f"{f'; {errors} could not be pulled (error records)' if errors else ''}", file=sys.stderr)
    return EXIT_OK


def _cache(args: argparse.Namespace) -> int:
    directory: Path = args.cache_dir or default_cache_dir()
    check_cache(directory, offline=True)  # a file is no cache; reading or clearing one needs no new file
    if args.action == "clear":
        removed = clear_cache(directory)
        print(f"tlmscore: removed {removed} cached pages from {directory}", file=sys.stderr)
        return EXIT_OK
    stats = cache_stats(directory)
    for field in dataclasses.fields(stats):
        print(f"{field.name}: {getattr(stats, field.name)}")
    return EXIT_OK


def _golden_scoring(args: argparse.Namespace) -> GoldenScoring | None:
    """`fixtures record`'s scoring: --scorer's, else the folder's own; --score-tolerance replaces its tolerance."""
    if args.scorer is not None:
        return GoldenScoring(args.scorer, _scorer_options(args), args.score_tolerance or 0.0)
    if args.option:
        raise ConfigError("--option needs --scorer")
    kept = golden_scoring(args.folder)
    if kept is None or args.score_tolerance is None:
        return kept
    return GoldenScoring(kept.scorer, kept.options, args.score_tolerance)


def _fixtures(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if args.action == "record":
        scoring = _golden_scoring(args)
        count = record_fixtures(args.folder, settings, scoring=scoring)
        scored = f", scored with {scoring.scorer} (tolerance {scoring.tolerance:g})" if scoring else ""
        print(f"tlmscore: recorded {count} transcripts in {args.folder}{scored}", file=sys.stderr)
        return EXIT_OK
    if args.scorer is not None or args.option:
        raise ConfigError("fixtures check scores with the folder's golden/scoring.json; --scorer is for record")
    report = check_fixtures(args.folder, settings, update=args.update, score_tolerance=args.score_tolerance)
    for diff in report.diffs:
        sys.stdout.write(diff if diff.endswith("\n") else diff + "\n")
    if report.ok:
        print(f"tlmscore: {report.checked} transcripts match their golden files", file=sys.stderr)
        return EXIT_OK
    verb = "updated" if args.update else "changed"
    print(f"tlmscore: {len(report.changed)} of {report.checked} transcripts {verb}: "
          + ", ".join(report.changed), file=sys.stderr)
    return EXIT_OK if args.update else EXIT_CHANGED


def _watch(args: argparse.Namespace) -> int:
    """`watch`: the scorer's options and the settings as `score` makes them, then the watch's loop."""
    options = _scorer_options(args)
    check_scorer(args.scorer, options)
    return run_watch(args, options, settings_from_args(args))


def _show_warning(  # noqa: PLR0917 -- the signature `warnings.showwarning` is called with
    message: Warning | str, category: type[Warning], filename: str, lineno: int,
    file: Any = None, line: str | None = None,
) -> None:
    """Show tlmscore's own warnings as one plain line on stderr, others as Python shows them."""
    text = str(message)
    if text.startswith("tlmscore: "):
        print(f"tlmscore: warning: {text.removeprefix('tlmscore: ')}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's own usage and error (exit 2), not the top-level usage
        command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return _dispatch(args)
        except KeyboardInterrupt:
            print("tlmscore: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


_CHECKS: dict[str, Callable[[argparse.Namespace], None]] = {
    "fixtures": check_fixtures_args, "calibrate": check_calibrate, "annotate": check_annotate, "pull": check_pull,
    "judge-server": check_judge_server}
"""The checks a command runs before any work, refusing what it must (one line, exit 2)."""


def _dispatch(args: argparse.Namespace) -> int:
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "prepare": _run, "score": _run, "watch": _watch, "fixtures": _fixtures, "calibrate": _calibrate,
        "compare": run_compare, "annotate": run_annotate, "pull": _pull, "plugins": run_plugins,
        "judge-server": run_judge_server, "cache": _cache}
    try:
        if args.command in _CHECKS:
            _CHECKS[args.command](args)
        return commands[args.command](args)
    except TlmscoreError as exc:
        print(f"tlmscore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValidationError as exc:  # a scorer's options (`--option`, `--model`…): the first problem, on one line
        print(f"tlmscore: error: {one_line(exc, SCORER_FLAGS, options=True)}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
