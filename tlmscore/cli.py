"""The `tlmscore` command: parse flags → Settings → one library call → a summary on stderr."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import sys
import warnings
from collections.abc import Callable, Container, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tlmscore.batch import ROW_COLUMNS, SCORE_COLUMNS, run_batch
from tlmscore.engines.command import add_engine_flags, run_ray
from tlmscore.errors import ConfigError, TlmscoreError
from tlmscore.evidence.cache import cache_stats, clear_cache
from tlmscore.fixtures import check_fixtures, record_fixtures
from tlmscore.logfile import check_readable
from tlmscore.manifest import build_manifest, describe_file, start_run
from tlmscore.progress import ProgressBars
from tlmscore.report import Checkpoint, ChunkWriter, Summary, output_format
from tlmscore.scoring.base import get_scorer, scorer_names
from tlmscore.settings import Settings, default_cache_dir

__all__ = ["build_parser", "main"]

EXIT_OK = 0
EXIT_CHANGED = 1
EXIT_USAGE = 2


def _add_io(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", type=Path, help="transcript files (.jsonl, .json)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="OUT.jsonl, OUT.csv or OUT.parquet")
    parser.add_argument("--resume", action="store_true",
                        help="continue an interrupted run: skip records already in OUT's checkpoint")
    parser.add_argument("--batch-input", action="append", default=[], type=Path, metavar="FILE",
                        help="OpenAI Batch API input file, joined to output lines by custom_id (repeatable)")
    add_engine_flags(parser)
    _add_common(parser)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="page cache (default: $TLMSCORE_CACHE_DIR or the user cache dir)")
    parser.add_argument("--offline", action="store_true", help="never touch the network; use cached pages only")
    parser.add_argument("--urls", choices=("cited", "sources", "all"), default="cited",
                        help="which web pages to fetch as evidence (default: cited)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="allow fetching from HOST even if it is a private or loopback address")
    parser.add_argument("--pages", action="append", default=[], type=Path, metavar="FILE",
                        help="page records (JSONL) to use before the cache and the network")
    parser.add_argument("--concurrency", type=int, default=None, help="parallel fetches (default 32)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per fetch (default 20)")
    parser.add_argument("--extract-timeout", type=float, default=None, metavar="SECONDS",
                        help="CPU seconds one page's text extraction may take (default 30)")
    parser.add_argument("--archive", choices=("off", "fallback", "prefer"), default=None,
                        help="read pages from a web archive as of the answer: off (default), fallback "
                             "(when the live page fails) or prefer (archive first); sends cited URLs to the archive")
    parser.add_argument("--archive-url", default=None, metavar="URL",
                        help="a Wayback-compatible archive (default https://web.archive.org)")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="records handled (fetched, scored, written) together (default 1000)")
    parser.add_argument("--reasoning", choices=("skip", "summary"), default="skip",
                        help="show reasoning summaries in the prompt (default: skip, as cleanlab-tlm)")
    parser.add_argument("--think", choices=("remove", "keep"), default="remove",
                        help="<think> reasoning in answer text: remove it, with a warning (default), or keep it")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    _add_network(parser)


def _add_network(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--per-host", type=int, default=None,
                        help="parallel fetches per host (default 6); with --engine ray, across the cluster")
    parser.add_argument("--proxy", metavar="URL", default=None,
                        help="send every fetch through this http(s) proxy (the address guard then sees less)")
    parser.add_argument("--trust-env", action="store_true",
                        help="use HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY from the environment")
    parser.add_argument("--ca-bundle", type=Path, default=None, metavar="FILE",
                        help="trust only the certificate authorities in this PEM file")
    parser.add_argument("--trust-store", choices=("system", "certifi"), default=None,
                        help="certificate authorities to trust: the operating system's (default) or certifi's")


def _network_values(args: argparse.Namespace) -> dict[str, Any]:
    """The Settings fields the network flags set (those given)."""
    given = {"per_host": args.per_host, "proxy": args.proxy, "ca_bundle": args.ca_bundle,
             "trust_store": args.trust_store}
    values = {name: value for name, value in given.items() if value is not None}
    if args.trust_env:
        values["trust_env"] = True
    if args.ca_bundle is not None and not args.ca_bundle.is_file():
        raise ConfigError(f"{args.ca_bundle}: no such CA bundle")
    return values


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="tlmscore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    prepare = sub.add_parser("prepare", help="render prompt and response strings for every record")
    _add_io(prepare)
    score = sub.add_parser("score", help="prepare, then score every answer")
    _add_io(score)
    score.add_argument("--scorer", default="grounding", choices=scorer_names(),
                       help="grounding (offline, default), tlm (Cleanlab TLM) or judge (an OpenAI-compatible model)")
    score.add_argument("--base-url", help="judge: the OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1")
    score.add_argument("--model", help="judge: the model name at the endpoint")
    score.add_argument("--api-key-env", help="judge/tlm: environment variable holding the API key")
    score.add_argument("--quality-preset", help="tlm: base, low, medium, high or best")
    score.add_argument("--option", action="append", metavar="KEY=VALUE",
                       help="any other scorer option (VALUE is JSON when it parses as JSON)")
    score.add_argument("--judge-batch", action="store_true",
                       help="judge: send requests through the OpenAI Batch API (half price, results within 24 h); "
                            "state kept in OUT.judge-batch/ so a rerun resumes")
    score.add_argument("--calibration", type=Path, metavar="CALIB.json",
                       help="add a calibrated_score column with this `tlmscore calibrate` file")
    calibrate = sub.add_parser("calibrate", help="fit a map from a scorer's score to P(correct) on labelled rows")
    calibrate.add_argument("scored", type=Path, metavar="SCORED",
                           help="a `tlmscore score` output (.jsonl, .csv, .parquet)")
    calibrate.add_argument("--labels", required=True, metavar="COL", help="the label column (true = correct)")
    calibrate.add_argument("--labels-from", type=Path, metavar="FILE",
                           help="take COL from this file (its columns or metadata), joined on id")
    calibrate.add_argument("--positive", action="append", metavar="VALUE",
                           help="label value meaning correct, for labels not true/false or 0/1 (repeatable)")
    calibrate.add_argument("--method", choices=("isotonic", "platt"), default="isotonic")
    calibrate.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    calibrate.add_argument("-o", "--output", required=True, type=Path, metavar="CALIB.json")
    fixtures = sub.add_parser("fixtures", help="record or check golden prompts of a fixture folder")
    fixtures.add_argument("action", choices=("record", "check"))
    fixtures.add_argument("folder", type=Path, metavar="DIR")
    fixtures.add_argument("--update", action="store_true", help="with check: rewrite what changed")
    _add_common(fixtures)
    cache = sub.add_parser("cache", help="inspect or clear the page cache")
    cache.add_argument("action", choices=("stats", "clear"))
    cache.add_argument("--cache-dir", type=Path, default=None)
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The one Settings object a command runs with."""
    values: dict[str, Any] = {"offline": args.offline, "urls": args.urls, "allow_hosts": args.allow_host,
                              "page_files": tuple(args.pages), "reasoning": args.reasoning,
                              "batch_inputs": tuple(getattr(args, "batch_input", ()))}
    if args.cache_dir is not None:
        values["cache_dir"] = args.cache_dir
    if args.concurrency is not None:
        values["concurrency"] = args.concurrency
    if args.timeout is not None:
        values["timeout"] = args.timeout
    if args.chunk_size is not None:
        values["chunk_size"] = args.chunk_size
    for flag in ("extract_timeout", "archive", "archive_url"):
        if getattr(args, flag, None) is not None:
            values[flag] = getattr(args, flag)
    if args.quiet:
        values["progress"] = False
    if getattr(args, "think", "remove") != "remove":
        values["think"] = args.think
    values.update(_network_values(args))
    return Settings(**values)


def _check_inputs(paths: Sequence[Path]) -> None:
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"{path}: no such file")
        check_readable(path)


def _scorer_options(args: argparse.Namespace) -> dict[str, Any]:
    """The scorer's options from its flags and every `--option KEY=VALUE` (VALUE read as JSON if it is)."""
    options: dict[str, Any] = {}
    for flag in ("base_url", "model", "api_key_env", "quality_preset"):
        if getattr(args, flag, None) is not None:
            options[flag] = getattr(args, flag)
    for item in args.option or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _judge_batch(args: argparse.Namespace, options: dict[str, Any]) -> dict[str, Any]:
    """With --judge-batch: batch mode, its state folder beside the output unless an option names one."""
    if not getattr(args, "judge_batch", False):
        return options
    if args.scorer != "judge":
        raise ConfigError("--judge-batch needs --scorer judge")
    return {"batch_dir": str(args.output) + ".judge-batch", **options, "batch": True}


def _submit_ahead(args: argparse.Namespace, settings: Settings, options: dict[str, Any],
                  skip: Container[tuple[str, int]]) -> None:
    """--judge-batch, first pass: every chunk's requests are submitted before any chunk waits for its batches.

    The second pass renders the same prompts (same input and cache), so it finds the same
    custom_ids in the batches submitted here and only polls and collects them.
    """
    print("tlmscore: judge batch: submitting the requests of every chunk before waiting for any", file=sys.stderr)
    submitter = get_scorer(args.scorer, {**options, "batch_submit_only": True})
    run_batch(list(args.inputs), settings, lambda rows: None, scorer=submitter, skip=skip)


@contextlib.contextmanager
def _scorer_log(enabled: bool) -> Iterator[None]:
    """Scorers' INFO messages (the judge's request count and token estimate) as `tlmscore:` lines on stderr."""
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


def _run(args: argparse.Namespace, *, scoring: bool) -> int:
    """`prepare` and `score`: rows go to a checkpoint as chunks finish, then to the output."""
    if args.engine == "ray":
        unsupported = [flag for flag, given in (("--judge-batch", getattr(args, "judge_batch", False)),
                                                ("--calibration", getattr(args, "calibration", None))) if given]
        if unsupported:
            raise ConfigError(f"{', '.join(unsupported)}: not available with --engine ray yet")
        _check_inputs([p for p in args.inputs if "://" not in str(p)])
        return run_ray(args, settings_from_args(args), args.scorer if scoring else None,
                       _scorer_options(args) if scoring else {})
    output_format(args.output)
    _check_inputs([*args.inputs, *args.batch_input])
    options = _judge_batch(args, _scorer_options(args)) if scoring else {}
    settings = settings_from_args(args)
    scorer = get_scorer(args.scorer, options) if scoring else None
    calibration = _calibration(args) if scoring else None
    row_options = {**options, "calibration": describe_file(args.calibration)} if calibration else options
    manifest = build_manifest(args.command, args.inputs, settings, scorer=args.scorer if scoring else None,
                              scorer_options=row_options)
    names = start_run(args.output, manifest, resume=args.resume)
    checkpoint = Checkpoint(args.output, resume=args.resume)
    skip = {(names.get(source, source), line) for source, line in checkpoint.done}
    summary = Summary()
    if checkpoint.done:
        print(f"tlmscore: resuming: {len(checkpoint.done)} records already done", file=sys.stderr)

    with ChunkWriter(checkpoint.write) as writer, ProgressBars(enabled=settings.progress) as bars:
        def sink(rows: list[dict[str, Any]]) -> None:
            if calibration is not None:
                calibration(rows)
            writer.submit(rows)
            summary.add(rows)

        def progress(stage: str, done: int, total: int | None) -> None:
            if stage == "fetch" and done:  # the first requests are out; pyarrow loads after them
                checkpoint.preload()
            bars.update(stage, done, total)

        with _scorer_log(scoring):
            if options.get("batch") and not options.get("batch_submit_only"):
                _submit_ahead(args, settings, options, skip)
            run_batch(list(args.inputs), settings, sink, progress=progress, scorer=scorer, skip=skip)
    scored = (*SCORE_COLUMNS, *(("calibrated_score",) if calibration else ())) if scoring else ()
    columns = (*ROW_COLUMNS, *scored)
    total = checkpoint.finish(settings.chunk_size, columns)
    print(summary.text(args.output, scored=scoring), file=sys.stderr)
    if checkpoint.done:
        print(f"tlmscore: {total} rows in {args.output} ({len(checkpoint.done)} from the earlier run)",
              file=sys.stderr)
    return EXIT_OK


def _calibration(args: argparse.Namespace) -> Callable[[list[dict[str, Any]]], None] | None:
    """With --calibration: what adds `calibrated_score` to rows, after checking the file fits the scorer."""
    if args.calibration is None:
        return None
    from tlmscore.calibrate import add_calibrated  # noqa: PLC0415  (numpy only when calibrating)
    from tlmscore.scoring import calibration  # noqa: PLC0415

    fitted = calibration.load(args.calibration)
    calibration.apply(fitted, [], scorer=args.scorer)
    return lambda rows: add_calibrated(rows, fitted)


def _calibrate(args: argparse.Namespace) -> int:
    """Fit, cross-validate and save a calibration; the reliability table goes to stdout."""
    from tlmscore.calibrate import calibrate_file, labelled_scores  # noqa: PLC0415  (numpy only when calibrating)
    from tlmscore.scoring.calibration import save as save_calibration  # noqa: PLC0415

    data = labelled_scores(args.scored, args.labels, labels_from=args.labels_from, positive=args.positive)
    calibration = calibrate_file(data, method=args.method, folds=args.folds)
    save_calibration(calibration, args.output)
    check = calibration.validation
    print(f"{'held-out bin':<12}  {'raw: rows':>9}  {'p':>4}  {'correct':>7}  {'calibrated: rows':>16}  {'p':>4}  "
          f"{'correct':>7}")
    for raw, cal in zip(check["bins_raw"], check["bins_calibrated"], strict=True):
        span = f"[{raw['low']:.1f}, {raw['high']:.1f})"
        print(f"{span:<12}  {raw['count']:>9}  {_fmt(raw['mean_probability'])}  "
              f"{_fmt(raw['accuracy']):>7}  {cal['count']:>16}  {_fmt(cal['mean_probability'])}  "
              f"{_fmt(cal['accuracy']):>7}")
    print(f"tlmscore: {args.method} calibration of {data.scorer} on {calibration.rows} rows "
          f"({calibration.positives} correct, {data.skipped} without score or label): expected calibration error "
          f"on held-out folds {check['ece_raw']:.3f} raw, {check['ece_calibrated']:.3f} calibrated "
          f"({check['folds']} folds); saved {args.output}", file=sys.stderr)
    return EXIT_OK


def _fmt(value: float | None) -> str:
    return "   -" if value is None else f"{value:4.2f}"


def _cache(args: argparse.Namespace) -> int:
    directory: Path = args.cache_dir or default_cache_dir()
    if args.action == "clear":
        removed = clear_cache(directory)
        print(f"tlmscore: removed {removed} cached pages from {directory}", file=sys.stderr)
        return EXIT_OK
    stats = cache_stats(directory)
    for field in dataclasses.fields(stats):
        print(f"{field.name}: {getattr(stats, field.name)}")
    return EXIT_OK


def _fixtures(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if args.action == "record":
        count = record_fixtures(args.folder, settings)
        print(f"tlmscore: recorded {count} transcripts in {args.folder}", file=sys.stderr)
        return EXIT_OK
    report = check_fixtures(args.folder, settings, update=args.update)
    for diff in report.diffs:
        sys.stdout.write(diff if diff.endswith("\n") else diff + "\n")
    if report.ok:
        print(f"tlmscore: {report.checked} transcripts match their golden files", file=sys.stderr)
        return EXIT_OK
    verb = "updated" if args.update else "changed"
    print(f"tlmscore: {len(report.changed)} of {report.checked} transcripts {verb}: "
          + ", ".join(report.changed), file=sys.stderr)
    return EXIT_OK if args.update else EXIT_CHANGED


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
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        if args.command in ("prepare", "score"):
            return _run(args, scoring=args.command == "score")
        if args.command == "fixtures":
            return _fixtures(args)
        if args.command == "calibrate":
            return _calibrate(args)
        return _cache(args)
    except (TlmscoreError, ValidationError) as exc:
        print(f"tlmscore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
