"""`tlmscore prepare|score ... --engine ray`: the command line's run on a Ray cluster.

The output is a folder: a Parquet dataset with one part per input (`part-00000/`, ...), the
single-machine columns plus `position`. A summary of rows and error rows goes to stderr.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from tlmscore.settings import Settings


def _uri(text: str) -> str:
    """An input as given: `Path` turns `s3://bucket/key` into `s3:/bucket/key`; undo that."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?!/)", r"\1://", text)


def _summary(out: Path) -> str:
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.dataset as pads  # noqa: PLC0415

    table = pads.dataset(str(out), format="parquet").to_table(columns=["error"])
    errors = table.num_rows - pc.sum(pc.is_null(table["error"])).as_py() if table.num_rows else 0
    return f"tlmscore: {table.num_rows} rows in {out} ({errors} with an error)"


def run_ray(args: argparse.Namespace, settings: Settings, scorer: str | None, options: dict[str, Any]) -> int:
    """Run `prepare` (scorer None) or `score` through `tlmscore.run` on the cluster at `--address`.

    Returns the exit code. `--calibration` wraps the scorer in every scoring actor; with
    `--judge-batch` the rows' prompts are judged in batches on this process, before the actors score.
    """
    from tlmscore import ray as engine  # noqa: PLC0415  (Ray loads only for this engine)
    from tlmscore.pipeline import run  # noqa: PLC0415

    ray = engine.connect(args.address)
    ray.data.DataContext.get_current().enable_progress_bars = bool(settings.progress)
    inputs = [_uri(str(p)) for p in args.inputs]
    earlier = len(engine.complete_inputs(args.output, inputs)) if args.resume else 0
    calibration = getattr(args, "calibration", None) if scorer is not None else None
    try:
        run(inputs, args.output, scorer=scorer, options=options, settings=settings, resume=args.resume,
            calibration=calibration, command=args.command,
            engine=engine.Engine(fetchers=args.fetchers, scorers=args.scorer_concurrency, page_store=args.page_store))
    finally:
        ray.shutdown()
    if args.resume:
        print(f"tlmscore: resuming: {earlier} of {len(inputs)} inputs were already done", file=sys.stderr)
    print(_summary(args.output), file=sys.stderr)
    return 0
