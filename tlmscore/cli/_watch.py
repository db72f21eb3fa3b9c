"""`tlmscore watch SOURCE`: score a live store's new calls as they arrive, the scores written back onto them.

The command's flags, and its loop around `tlmscore.watch.watch`: the status line (redrawn on a
terminal, a plain line every `--status-every` seconds otherwise), SIGTERM and Ctrl-C finishing the
batch in flight and saving the cursor, and the last counts when it ends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import signal
import sys
from pathlib import Path
from typing import Any

from tlmscore.errors import ConfigError
from tlmscore.watch import Hooks, StatusLine, parse_time, parse_where, watch

EXAMPLES = """\
examples:
  tlmscore watch phoenix://127.0.0.1:6006/default --state /var/lib/tlmscore/watch.json
  tlmscore watch phoenix://127.0.0.1:6006/default --sample 0.1 --where model=gpt-4o* --since 2026-01-01
  tlmscore watch mlflow://127.0.0.1:5000/my-agent --state watch.json --until-idle
  tlmscore watch phoenix://127.0.0.1:6006/default --scorer judge --base-url http://127.0.0.1:8080/v1 \\
      --model qwen2.5 --price-in 0.1 --price-out 0.4 --max-cost-per-day 5
"""


def add_watch_parser(sub: Any, formatter: Any, add_scoring: Any, add_evidence: Any) -> None:
    """The `watch` command's flags (`add_scoring` and `add_evidence` add the flags it shares with `score`)."""
    parser = sub.add_parser("watch", help="score a live store's new calls as they arrive, and annotate them",
                            description="Score a live store's new calls as they arrive (a sample, a filter, a "
                                        "spend cap), and write each score back onto its span.",
                            epilog=EXAMPLES, formatter_class=formatter)
    parser.add_argument("source", metavar="SOURCE",
                        help="a live store: phoenix://HOST:PORT/PROJECT or mlflow://HOST:PORT/EXPERIMENT")
    group = parser.add_argument_group("which calls")
    group.add_argument("--state", type=Path, default=Path("tlmscore-watch.json"), metavar="FILE",
                       help="the cursor, spend and counts, saved after each batch (default: %(default)s)")
    group.add_argument("--since", default=None, metavar="TIME",
                       help="with no saved cursor: start from calls started at TIME (default: the first call)")
    group.add_argument("--sample", type=float, default=1.0, metavar="RATE",
                       help="score this share of traces, chosen by a hash of the trace id (default 1)")
    group.add_argument("--where", action="append", default=[], metavar="COND",
                       help="model=PATTERN, metadata.KEY=PATTERN or tool=KIND (or !=; wildcards; repeatable, "
                            "all must hold)")
    group.add_argument("--rescore", action="store_true",
                       help="score again calls another evaluator identity (version, settings) annotated")
    group.add_argument("--late", type=float, default=60.0, metavar="SECONDS",
                       help="how long after a newer call a call may still arrive and be scored (default 60)")
    group.add_argument("--poll", type=float, default=2.0, metavar="SECONDS",
                       help="seconds between polls once caught up (default 2)")
    group.add_argument("--batch", type=int, default=200, metavar="N", help="calls per batch (default 200)")
    group.add_argument("--until-idle", action="store_true", help="end at the first poll that finds nothing new")
    group.add_argument("--status-every", type=float, default=60.0, metavar="SECONDS",
                       help="off a terminal: print the status line this often (default 60)")
    add_scoring(parser)
    add_evidence(parser)
    parser.set_defaults(chunk_size=None, quiet=True, reasoning="skip", think="remove")


def _since(text: str | None) -> dt.datetime | None:
    if text is None:
        return None
    try:
        return parse_time(text)
    except ValueError:
        raise ConfigError(f"--since {text!r}: not an ISO 8601 time") from None


def run_watch(args: argparse.Namespace, options: dict[str, Any], settings: Any) -> int:
    """Watch until SIGTERM, Ctrl-C or (`--until-idle`) nothing new; the last counts on stderr."""
    for flag in ("max_cost_per_hour", "max_cost_per_day"):
        value = getattr(args, flag)
        if value is not None and value < 0:
            raise ConfigError(f"--{flag.replace('_', '-')} {value:g}: must be at least 0")
    line = StatusLine(sys.stderr, every=args.status_every)
    last: list[Any] = []

    def status(counts: Any) -> None:
        last[:] = [counts]
        line.show(counts)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, stop.set)
        rows = watch(args.source, state=args.state, scorer=args.scorer, options=options, settings=settings,
                     sample=args.sample, where=parse_where(args.where), since=_since(args.since), late=args.late,
                     poll=args.poll, batch=args.batch, max_cost_per_hour=args.max_cost_per_hour,
                     max_cost_per_day=args.max_cost_per_day, rescore=args.rescore, threshold=args.threshold,
                     until_idle=args.until_idle, stop=stop, hooks=Hooks(status=status, note=line.note))
        async for _ in rows:
            pass

    asyncio.run(main())
    if last:
        line.end(last[0])
    return 0
