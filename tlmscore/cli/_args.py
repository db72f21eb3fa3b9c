"""Argument parsing: the flags of every command, and the frozen `Settings` they build."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tlmscore.cli._annotate import add_annotate_flags, add_annotate_parser
from tlmscore.cli._compare import add_compare_parser
from tlmscore.engines._command import add_engine_flags
from tlmscore.errors import ConfigError
from tlmscore.scoring.base import scorer_names
from tlmscore.settings import Settings
from tlmscore.sources._phoenix import with_window
from tlmscore.sources.registry import is_live, readers


def _input(value: str) -> str | Path:
    """An input as given: a live source's address (`phoenix://…`) stays text, anything else is a path."""
    return value if is_live(value) else Path(value)


def _add_io(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", type=_input,
                        help="transcript files, span exports (.jsonl, .json, .parquet, .csv) or a live source "
                             "(phoenix://HOST:PORT/PROJECT)")
    parser.add_argument("--format", default=None, metavar="NAME", dest="input_format",
                        help="read every input with this source reader (records, " +
                             ", ".join(sorted(readers())) + "; default: by content)")
    parser.add_argument("--since", default=None, metavar="TIME", help="live source: spans started at or after TIME")
    parser.add_argument("--until", default=None, metavar="TIME", help="live source: spans started before TIME")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="live source: at most N spans")
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
    add_annotate_flags(score)
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
    fixtures.add_argument("--scorer", choices=scorer_names(),
                          help="with record: score every answer too and keep the scores (golden/scoring.json)")
    fixtures.add_argument("--option", action="append", metavar="KEY=VALUE", help="with --scorer: a scorer option")
    fixtures.add_argument("--score-tolerance", type=float, metavar="T",
                          help="how far a score may move from its golden score (record: kept; check: this run)")
    _add_common(fixtures)
    add_compare_parser(sub)
    add_annotate_parser(sub)
    pull = sub.add_parser("pull", help="fetch stored responses by id (GET /v1/responses/{id}) as transcript records")
    pull.add_argument("ids", nargs="+", metavar="IDS",
                      help="a file of response ids (one a line), a table (.csv, .parquet, .jsonl) with an id column, "
                           "or ids themselves")
    pull.add_argument("-o", "--output", required=True, type=Path, metavar="OUT.jsonl")
    pull.add_argument("--column", default="response_id", help="the id column of a table (default response_id)")
    pull.add_argument("--concurrency", type=int, default=8, help="responses fetched at once (default 8)")
    pull.add_argument("--resume", action="store_true", help="skip ids already in OUT and append the rest")
    pull.add_argument("--base-url", default=None,
                      help="the API root (default $OPENAI_BASE_URL or OpenAI's); the key is $OPENAI_API_KEY")
    cache = sub.add_parser("cache", help="inspect or clear the page cache")
    cache.add_argument("action", choices=("stats", "clear"))
    cache.add_argument("--cache-dir", type=Path, default=None)
    return parser


def run_inputs(args: argparse.Namespace) -> list[str | Path]:
    """The inputs of `prepare`/`score`, a live source's address with `--since`, `--until`, `--limit` in it."""
    window = (args.since, args.until, args.limit)
    if any(v is not None for v in window) and not any(isinstance(i, str) for i in args.inputs):
        raise ConfigError("--since, --until and --limit apply to a live source (phoenix://HOST:PORT/PROJECT)")
    return [with_window(i, *window) if isinstance(i, str) else i for i in args.inputs]


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
    if getattr(args, "input_format", None) is not None:
        values["input_format"] = args.input_format
    if getattr(args, "think", "remove") != "remove":
        values["think"] = args.think
    values.update(_network_values(args))
    return Settings(**values)
