"""The `tlmscore` command: parse flags → Settings → one library call → a summary on stderr."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tlmscore.batch import ROW_COLUMNS, run_batch
from tlmscore.errors import ConfigError, TlmscoreError
from tlmscore.evidence.cache import cache_stats, clear_cache
from tlmscore.fixtures import check_fixtures, record_fixtures
from tlmscore.progress import ProgressBars
from tlmscore.report import RowWriter, output_format
from tlmscore.settings import Settings, default_cache_dir

__all__ = ["build_parser", "main"]

EXIT_OK = 0
EXIT_CHANGED = 1
EXIT_USAGE = 2
_ERRORS_SHOWN = 10


def _add_io(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", type=Path, help="transcript files (.jsonl, .json)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="OUT.jsonl, OUT.csv or OUT.parquet")
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
    parser.add_argument("--reasoning", choices=("skip", "summary"), default="skip",
                        help="show reasoning summaries in the prompt (default: skip, as cleanlab-tlm)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="tlmscore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    prepare = sub.add_parser("prepare", help="render prompt and response strings for every record")
    _add_io(prepare)
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
                              "page_files": tuple(args.pages), "reasoning": args.reasoning}
    if args.cache_dir is not None:
        values["cache_dir"] = args.cache_dir
    if args.concurrency is not None:
        values["concurrency"] = args.concurrency
    if args.timeout is not None:
        values["timeout"] = args.timeout
    if args.quiet:
        values["progress"] = False
    return Settings(**values)


def _check_inputs(paths: Sequence[Path]) -> None:
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"{path}: no such file")


def _summary(rows: list[dict[str, Any]], out: Path) -> str:
    errors = sum(1 for r in rows if r.get("error"))
    warned = sum(1 for r in rows if r.get("warnings"))
    urls = sum(int(r.get("n_urls") or 0) for r in rows)
    failed = sum(int(r.get("n_urls_failed") or 0) for r in rows)
    lines = [f"tlmscore: {len(rows)} records → {out}: {len(rows) - errors} prepared, {errors} errors, "
             f"{warned} with warnings; evidence pages: {urls - failed} ok, {failed} unavailable"]
    lines += [f"  error: {r['error']}" for r in rows if r.get("error")][:_ERRORS_SHOWN]
    if errors > _ERRORS_SHOWN:
        lines.append(f"  … and {errors - _ERRORS_SHOWN} more errors (see the 'error' column)")
    return "\n".join(lines)


def _prepare(args: argparse.Namespace) -> int:
    output_format(args.output)
    _check_inputs(args.inputs)
    settings = settings_from_args(args)
    seen: list[dict[str, Any]] = []
    bars = ProgressBars(enabled=settings.progress)
    with RowWriter(args.output) as writer, bars:
        def sink(rows: list[dict[str, Any]]) -> None:
            writer.write(rows)
            seen.extend({k: r.get(k) for k in ROW_COLUMNS if k not in ("prompt", "response")} for r in rows)

        run_batch(list(args.inputs), settings, sink, progress=bars.update)
    print(_summary(seen, args.output), file=sys.stderr)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            return _prepare(args)
        if args.command == "fixtures":
            return _fixtures(args)
        return _cache(args)
    except (ConfigError, ValidationError) as exc:
        print(f"tlmscore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TlmscoreError as exc:
        print(f"tlmscore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
