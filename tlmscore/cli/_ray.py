"""`tlmscore prepare|score ... --engine ray`: the command line's run, its rows made on a Ray cluster.

The run is the one of a single machine (`tlmscore.run`: the same output file, resume rules,
progress and summary); only the engine differs. Ray is connected to the cluster at `--address`
(or a new local one) for the run and disconnected after it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tlmscore.pipeline import Engine


@contextlib.contextmanager
def ray_engine(args: argparse.Namespace, *, progress: bool) -> Iterator[Engine]:
    """The Ray engine the flags ask for (`--fetchers`, `--scorer-concurrency`, `--page-store`), connected meanwhile."""
    from tlmscore import ray as engine  # noqa: PLC0415  (Ray loads only for this engine)

    level = logging.INFO if progress else logging.WARNING  # quiet: no log lines of Ray's either
    ray = engine.connect(args.address, logging_level=level)
    ray.data.DataContext.get_current().enable_progress_bars = progress
    data_log = logging.getLogger("ray.data")
    kept = data_log.level
    data_log.setLevel(level)
    try:
        made = engine.Engine(fetchers=args.fetchers, scorers=args.scorer_concurrency, page_store=args.page_store)
        made.check(scoring=args.command == "score")  # before the run opens its output
        yield made
    finally:
        data_log.setLevel(kept)
        ray.shutdown()
