"""The `tlmscore` command: parse flags → Settings → one library call → a summary on stderr."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tlmscore.batch import run_batch
from tlmscore.engines.command import add_engine_flags, run_ray
from tlmscore.errors import ConfigError, TlmscoreError
from tlmscore.evidence.cache import cache_stats, clear_cache
from tlmscore.fixtures import check_fixtures, record_fixtures
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
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="records handled (fetched, scored, written) together (default 1000)")
    parser.add_argument("--reasoning", choices=("skip", "summary"), default="skip",
                        help="show reasoning summaries in the prompt (default: skip, as cleanlab-tlm)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


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
    if args.quiet:
        values["progress"] = False
    if getattr(args, "per_host", None) is not None:
        values["per_host"] = args.per_host
    return Settings(**values)


def _check_inputs(paths: Sequence[Path]) -> None:
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"{path}: no such file")


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


def _run(args: argparse.Namespace, *, scoring: bool) -> int:
    """`prepare` and `score`: rows go to a checkpoint as chunks finish, then to the output."""
    if args.engine == "ray":
        _check_inputs([p for p in args.inputs if "://" not in str(p)])
        return run_ray(args, settings_from_args(args), args.scorer if scoring else None,
                       _scorer_options(args) if scoring else {})
    output_format(args.output)
    _check_inputs([*args.inputs, *args.batch_input])
    settings = settings_from_args(args)
    scorer = get_scorer(args.scorer, _scorer_options(args)) if scoring else None
    checkpoint = Checkpoint(args.output, resume=args.resume)
    summary = Summary()
    if checkpoint.done:
        print(f"tlmscore: resuming: {len(checkpoint.done)} records already done", file=sys.stderr)

    with ChunkWriter(checkpoint.write) as writer, ProgressBars(enabled=settings.progress) as bars:
        def sink(rows: list[dict[str, Any]]) -> None:
            writer.submit(rows)
            summary.add(rows)

        def progress(stage: str, done: int, total: int | None) -> None:
            if stage == "fetch" and done:  # the first requests are out; pyarrow loads after them
                checkpoint.preload()
            bars.update(stage, done, total)

        run_batch(list(args.inputs), settings, sink, progress=progress, scorer=scorer, skip=checkpoint.done)
    total = checkpoint.finish(settings.chunk_size)
    print(summary.text(args.output, scored=scoring), file=sys.stderr)
    if checkpoint.done:
        print(f"tlmscore: {total} rows in {args.output} ({len(checkpoint.done)} from the earlier run)",
              file=sys.stderr)
    return EXIT_OK


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
        return _cache(args)
    except (TlmscoreError, ValidationError) as exc:
        print(f"tlmscore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
