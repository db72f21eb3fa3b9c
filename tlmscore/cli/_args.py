"""Argument parsing: the flags of every command, grouped, and the frozen `Settings` they build.

The help texts show each default from `Settings` itself, so `--help` and a run never disagree.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from tlmscore import __version__
from tlmscore.cli._annotate import add_annotate_flags, add_annotate_parser
from tlmscore.cli._checks import PAGE_MODEL_OPTIONS, one_line
from tlmscore.cli._compare import add_compare_parser
from tlmscore.cli._judge_server import add_judge_server_parser
from tlmscore.cli._watch import add_watch_parser
from tlmscore.errors import ConfigError
from tlmscore.scoring.base import scorer_names
from tlmscore.settings import Settings
from tlmscore.stores import is_live, readers, with_window


def _input(value: str) -> str | Path:
    """An input as given: a live source's address (`phoenix://…`) stays text, anything else is a path."""
    return value if is_live(value) else Path(value)

DESCRIPTION = """\
Score logged LLM answers for trustworthiness, against the evidence they cite.

tlmscore reads logged API calls (OpenAI Responses, Chat Completions, Batch API output), fetches
the web pages the answers cite, rebuilds each call as the prompt and response a trust scorer sees,
and scores how well the answer is supported by that evidence: one output row per input record.
A score measures grounding in the evidence, not truth; NaN means there was nothing to check."""

_EXAMPLES = """\
examples:
  tlmscore {command} logs.jsonl -o {out} --offline --pages pages.jsonl
  tlmscore {command} logs/*.jsonl.gz -o {out}{extra}"""

_TOP_EPILOG = """\
examples:
  tlmscore score logs.jsonl -o scores.parquet        score with the offline grounding scorer
  tlmscore score --help                              every option of a run, grouped
docs: see docs/ in the source tree (docs/cli.md lists every flag)"""


def _default(name: str) -> Any:
    """The default of a `Settings` field, as the help texts show it."""
    return Settings.model_fields[name].get_default(call_default_factory=False)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose error is one line saying where the flags are listed, not a usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"tlmscore: error: {message} (see {self.prog} --help)\n")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def _add_input(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("input")
    group.add_argument("inputs", nargs="+", metavar="INPUT", type=_input,
                       help="transcript files (.jsonl, .json, optionally .gz: records, Batch API output, Chat, "
                            "event streams), span exports (.jsonl, .json, .parquet, .csv, OTLP) or a live source "
                            "(phoenix://HOST:PORT/PROJECT)")
    group.add_argument("--format", default=None, metavar="NAME", dest="input_format",
                       help="read every input with this source reader (records, " +
                            ", ".join(sorted(readers())) + "; default: by content)")
    group.add_argument("--since", default=None, metavar="TIME", help="live source: spans started at or after TIME")
    group.add_argument("--until", default=None, metavar="TIME", help="live source: spans started before TIME")
    group.add_argument("--limit", type=int, default=None, metavar="N", help="live source: at most N spans")
    group.add_argument("--hydrate", action="store_true",
                       help="fill in records that hold only a response_id (span exports) from the stored "
                            "responses (key: $OPENAI_API_KEY, API root: $OPENAI_BASE_URL)")
    group.add_argument("--batch-input", action="append", default=[], type=Path, metavar="FILE",
                       help="OpenAI Batch API input file, joined to output lines by custom_id (repeatable)")
    group.add_argument("--reasoning", choices=("skip", "summary"), default=_default("reasoning"),
                       help="show reasoning summaries in the prompt (default: %(default)s, as cleanlab-tlm)")
    group.add_argument("--think", choices=("remove", "keep"), default=_default("think"),
                       help="<think> reasoning in answer text: remove it with a warning, or keep it "
                            "(default: %(default)s)")


def _add_output(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("-o", "--output", required=True, type=Path, metavar="OUT",
                       help="OUT.jsonl, OUT.csv or OUT.parquet (a file, on either engine)")
    group.add_argument("--resume", action="store_true",
                       help="continue an interrupted run: skip records already in OUT's checkpoint")
    group.add_argument("--chunk-size", type=int, default=None, metavar="N",
                       help=f"records handled (fetched, scored, written) together (default {_default('chunk_size')})")
    group.add_argument("--quiet", action="store_true", help="no progress bars (drawn only on a terminal anyway)")


def _add_evidence(parser: argparse.ArgumentParser, *, ray: bool = True) -> None:
    group = parser.add_argument_group("evidence (web pages the answers cite)")
    group.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                       help="page cache, and the judge's verdicts in DIR/judge (default: $TLMSCORE_CACHE_DIR, "
                            "else ~/.cache/tlmscore)")
    group.add_argument("--offline", action="store_true",
                       help="never touch the network, nor write the cache: cached and --pages pages only")
    group.add_argument("--pages", action="append", default=[], type=Path, metavar="PATH",
                       help="page records (a JSONL file, or a folder of .json records) to use before the cache and "
                            "the network (repeatable)")
    group.add_argument("--urls", choices=("cited", "sources", "all"), default=_default("urls"),
                       help="which web pages become evidence (default: %(default)s)")
    group.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                       help="allow fetching from HOST even if it is a private or loopback address (repeatable)")
    group.add_argument("--concurrency", type=int, default=None, metavar="N",
                       help=f"parallel fetches (default {_default('concurrency')})")
    group.add_argument("--per-host", type=int, default=None, metavar="N",
                       help=f"parallel fetches per host (default {_default('per_host')})"
                            + ("; with --engine ray, across the cluster" if ray else ""))
    group.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                       help=f"seconds per page, retries and redirects included (default {_default('timeout'):g})")
    group.add_argument("--extract-timeout", type=float, default=None, metavar="SECONDS",
                       help="CPU seconds one page's text extraction may take "
                            f"(default {_default('extract_timeout'):g})")
    group.add_argument("--extractor", choices=("recall", "balanced", "precision", "resiliparse"), default=None,
                       help="how a page's main text is found: trafilatura favouring recall, balanced or favouring "
                            "precision, or resiliparse, the fastest (extra resiliparse) "
                            f"(default: {_default('extractor')}; docs/fetching.md)")
    group.add_argument("--archive", choices=("off", "fallback", "prefer"), default=None,
                       help="pages as of the answer from a web archive: off, fallback (when the live page "
                            f"fails) or prefer (default: {_default('archive')}); sends cited URLs to the archive")
    group.add_argument("--archive-url", default=None, metavar="URL",
                       help=f"a Wayback-compatible archive (default {_default('archive_url')})")
    group.add_argument("--proxy", metavar="URL", default=None,
                       help="send every fetch through this http(s) proxy (the address guard then sees less)")
    group.add_argument("--trust-env", action="store_true",
                       help="use HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY from the environment")
    group.add_argument("--ca-bundle", type=Path, default=None, metavar="FILE",
                       help="trust only the certificate authorities in this PEM file")
    group.add_argument("--trust-store", choices=("system", "certifi"), default=None,
                       help="certificate authorities to trust: the operating system's or certifi's "
                            f"(default: {_default('trust_store')})")


def _add_page_model(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("pages read by a model (for pages that refuse fetchers; docs/fetching.md)")
    group.add_argument("--page-source", choices=("fetch", "chat", "chat:always"), default=None,
                       help="fetch: the cache, the web and the archive only; chat: then a search-augmented model "
                            "reads the pages they could not give; chat:always: the model reads every page "
                            f"(default: {_default('page_source')}); sends those URLs to the model's provider")
    group.add_argument("--page-base-url", metavar="URL", help="the page model's OpenAI-compatible API root, e.g. "
                                                              "https://api.perplexity.ai")
    group.add_argument("--page-model", metavar="NAME", help="the page model's name at --page-base-url, e.g. sonar")
    group.add_argument("--page-api-key-env", metavar="VAR",
                       help="environment variable holding the page model's key (default: no key is sent)")
    group.add_argument("--page-concurrency", type=int, metavar="N",
                       help=f"requests to the page model in flight (default {_default('page_concurrency')})")
    group.add_argument("--page-price-in", type=float, metavar="USD",
                       help="dollars per million input tokens of the page model, for the cost estimate")
    group.add_argument("--page-price-out", type=float, metavar="USD",
                       help="dollars per million output tokens of the page model")
    group.add_argument("--page-price-request", type=float, metavar="USD",
                       help="dollars per request to the page model (a provider's search fee)")
    group.add_argument("--page-max-cost", type=float, metavar="USD",
                       help="refuse (exit 2) to send page model requests estimated to cost more than this")


def _add_scoring(parser: argparse.ArgumentParser, *, watch: bool = False) -> None:
    """The scorer and its endpoint's flags; `score` adds its run's, `watch` its spend caps per hour and day."""
    group = parser.add_argument_group("scoring and spend" if watch else "scoring")
    group.add_argument("--scorer", default="grounding", choices=scorer_names(),
                       help="grounding (offline, no model or key; default), judge (an OpenAI-compatible model) "
                            "or tlm (Cleanlab TLM, needs a key)")
    group.add_argument("--model", help="judge: the model name at the endpoint (required with --scorer judge)")
    group.add_argument("--base-url", help="judge: the OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1")
    group.add_argument("--api-key-env", metavar="VAR", help="judge/tlm: environment variable holding the API key")
    group.add_argument("--option", action="append", metavar="KEY=VALUE",
                       help="any other scorer option (VALUE is JSON when it parses as JSON; repeatable)")
    group.add_argument("--price-in", type=float, metavar="USD",
                       help="judge: dollars per million input tokens, for the cost estimate (models not in "
                            "the price table)")
    group.add_argument("--price-out", type=float, metavar="USD", help="judge: dollars per million output tokens")
    if watch:
        group.add_argument("--max-cost-per-hour", type=float, metavar="USD",
                           help="send no model request past these dollars in a clock hour (UTC)")
        group.add_argument("--max-cost-per-day", type=float, metavar="USD",
                           help="send no model request past these dollars in a day (UTC)")
        group.add_argument("--threshold", type=float, default=0.5,
                           help="a score at or above it is labelled supported (default 0.5)")
        return
    group.add_argument("--quality-preset", help="tlm: base, low, medium, high or best")
    group.add_argument("--judge-batch", action="store_true",
                       help="judge: send requests through the OpenAI Batch API (half price, results within "
                            "24 h); state kept in OUT.judge-batch/ so a rerun resumes")
    group.add_argument("--no-judge-cache", action="store_true",
                       help="judge: send every request and keep no verdict (default: verdicts are kept in "
                            "the cache folder's judge/ and a rerun sends nothing twice)")
    group.add_argument("--max-cost", type=float, metavar="USD",
                       help="judge: refuse to start (exit 2) when the estimated cost is above this")
    group.add_argument("--calibration", type=Path, metavar="CALIB.json",
                       help="add a calibrated_score column with this `tlmscore calibrate` file")
    group.add_argument("--score-workers", type=int, default=None, metavar="N",
                       help="processes the grounding scorer runs in (default: one per core; 1: in this process)")


def _add_engine(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine (where the run happens)")
    group.add_argument("--engine", choices=("local", "ray"), default="local",
                       help="local (default) or ray: make the rows on a Ray cluster (the same OUT, resume and summary)")
    group.add_argument("--address", default=None,
                       help="ray: the cluster (auto, HOST:PORT or ray://HOST:PORT; default: a local one)")
    group.add_argument("--page-store", default=None, metavar="PATH",
                       help="ray: Parquet page store read before the network and added to (any pyarrow path)")
    group.add_argument("--fetchers", type=int, default=2, metavar="N", help="ray: page fetch actors (default 2)")
    group.add_argument("--scorer-concurrency", type=int, default=2, metavar="N",
                       help="ray: scorer actors (default 2)")


def _add_fixture_flags(parser: argparse.ArgumentParser) -> None:
    """What `fixtures` renders with: the input and evidence flags of a run, without its inputs and output."""
    group = parser.add_argument_group("rendering")
    group.add_argument("--reasoning", choices=("skip", "summary"), default=_default("reasoning"),
                       help="show reasoning summaries in the prompt (default: %(default)s)")
    group.add_argument("--think", choices=("remove", "keep"), default=_default("think"),
                       help="<think> reasoning in answer text (default: %(default)s)")
    group.add_argument("--chunk-size", type=int, default=None, metavar="N",
                       help=f"records rendered together (default {_default('chunk_size')})")
    group.add_argument("--quiet", action="store_true", help="no progress bars")
    _add_evidence(parser, ray=False)  # fixtures render on this machine: no --engine


def _run_parser(sub: Any, command: str, *, scoring: bool, help_text: str) -> None:
    """`prepare` or `score`, its flags in the order a newcomer needs them."""
    extra = " --scorer judge --base-url http://127.0.0.1:8080/v1 --model qwen2.5" if scoring else ""
    out = "scores.parquet" if scoring else "rows.parquet"
    parser = sub.add_parser(command, help=help_text, description=help_text[0].upper() + help_text[1:] + ".",
                            epilog=_EXAMPLES.format(command=command, out=out, extra=extra),
                            formatter_class=_formatter)
    _add_input(parser)
    _add_output(parser)
    if scoring:
        _add_scoring(parser)
    _add_evidence(parser)
    _add_page_model(parser)
    _add_engine(parser)
    if scoring:
        add_annotate_flags(parser)


def _add_calibrate(sub: Any) -> None:
    calibrate = sub.add_parser("calibrate", help="fit a map from a scorer's score to P(correct) on labelled rows",
                               formatter_class=_formatter)
    calibrate.add_argument("scored", type=Path, metavar="SCORED",
                           help="a `tlmscore score` output (.jsonl, .csv, .parquet)")
    calibrate.add_argument("--labels", required=True, metavar="COL", help="the label column (true = correct)")
    calibrate.add_argument("--labels-from", type=Path, metavar="FILE",
                           help="take COL from this file (its columns or metadata), joined on id")
    calibrate.add_argument("--positive", action="append", metavar="VALUE",
                           help="label value meaning correct, for labels not true/false or 0/1 (repeatable)")
    calibrate.add_argument("--method", choices=("isotonic", "platt"), default="isotonic",
                           help="isotonic (default) or platt")
    calibrate.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    calibrate.add_argument("-o", "--output", required=True, type=Path, metavar="CALIB.json")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(prog="tlmscore", description=DESCRIPTION, epilog=_TOP_EPILOG,
                                     formatter_class=_formatter)
    parser.add_argument("--version", action="version", version=f"tlmscore {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _run_parser(sub, "score", scoring=True, help_text="prepare, then score every answer (the usual command)")
    _run_parser(sub, "prepare", scoring=False, help_text="render prompt and response strings for every record")
    _add_calibrate(sub)
    fixtures = sub.add_parser("fixtures", help="record or check golden prompts of a fixture folder",
                              formatter_class=_formatter)
    fixtures.add_argument("action", choices=("record", "check"))
    fixtures.add_argument("folder", type=Path, metavar="DIR")
    fixtures.add_argument("--update", action="store_true", help="with check: rewrite what changed")
    fixtures.add_argument("--scorer", choices=scorer_names(),
                          help="with record: score every answer too and keep the scores (golden/scoring.json)")
    fixtures.add_argument("--option", action="append", metavar="KEY=VALUE", help="with --scorer: a scorer option")
    fixtures.add_argument("--score-tolerance", type=float, metavar="T",
                          help="how far a score may move from its golden score (record: kept; check: this run)")
    _add_fixture_flags(fixtures)
    add_compare_parser(sub)
    add_annotate_parser(sub)
    _add_pull(sub)
    add_watch_parser(sub, _formatter, functools.partial(_add_scoring, watch=True), _add_evidence)
    add_judge_server_parser(sub, _formatter)
    sub.add_parser("plugins", help="list the plug-ins of every kind: built in, installed, refused",
                   formatter_class=_formatter)
    cache = sub.add_parser("cache", help="inspect or clear the page cache", formatter_class=_formatter)
    cache.add_argument("action", choices=("stats", "clear"))
    cache.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                       help="page cache (default: $TLMSCORE_CACHE_DIR, else ~/.cache/tlmscore)")
    return parser


def command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one command of `build_parser()`'s parser."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = commands.choices[command]
    return found


def _add_pull(sub: Any) -> None:
    pull = sub.add_parser("pull", help="fetch stored responses by id (GET /v1/responses/{id}) as transcript records",
                          formatter_class=_formatter)
    pull.add_argument("ids", nargs="+", metavar="IDS",
                      help="a file of response ids (one a line), a table (.csv, .parquet, .jsonl) with an id column, "
                           "or ids themselves")
    pull.add_argument("-o", "--output", required=True, type=Path, metavar="OUT.jsonl")
    pull.add_argument("--column", default="response_id", help="the id column of a table (default response_id)")
    pull.add_argument("--concurrency", type=int, default=8, help="responses fetched at once (default 8)")
    pull.add_argument("--resume", action="store_true", help="skip ids already in OUT and append the rest")
    pull.add_argument("--base-url", default=None,
                      help="the API root (default $OPENAI_BASE_URL or OpenAI's); the key is $OPENAI_API_KEY")


def run_inputs(args: argparse.Namespace) -> list[str | Path]:
    """The inputs of `prepare`/`score`, a live source's address with `--since`, `--until`, `--limit` in it."""
    window = (args.since, args.until, args.limit)
    if any(v is not None for v in window) and not any(isinstance(i, str) for i in args.inputs):
        raise ConfigError("--since, --until and --limit apply to a live source (phoenix://HOST:PORT/PROJECT)")
    return [with_window(i, *window) if isinstance(i, str) else i for i in args.inputs]


_GIVEN = ("cache_dir", "concurrency", "per_host", "timeout", "extract_timeout", "extractor", "archive", "archive_url",
          "proxy", "ca_bundle", "trust_store", "chunk_size", "score_workers", "input_format", "page_source",
          *PAGE_MODEL_OPTIONS)
"""The `Settings` fields a command's flag sets when it is given (else the field's default holds)."""


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The one Settings object a command runs with."""
    if args.ca_bundle is not None and not args.ca_bundle.is_file():
        raise ConfigError(f"{args.ca_bundle}: no such CA bundle")
    values: dict[str, Any] = {"offline": args.offline, "urls": args.urls, "allow_hosts": args.allow_host,
                              "page_files": tuple(args.pages), "reasoning": args.reasoning, "think": args.think,
                              "batch_inputs": tuple(getattr(args, "batch_input", ()))}
    values |= {name: getattr(args, name) for name in _GIVEN if getattr(args, name, None) is not None}
    values |= {name: True for name in ("trust_env", "hydrate") if getattr(args, name, False)}
    if args.quiet:
        values["progress"] = False
    try:
        return Settings(**values)
    except ValidationError as exc:
        raise ConfigError(one_line(exc, _SETTING_FLAGS)) from None


_SETTING_FLAGS = {"allow_hosts": "--allow-host", "page_files": "--pages", "batch_inputs": "--batch-input",
                  "input_format": "--format"}
"""The flag of each `Settings` field whose flag is not its name with dashes."""
