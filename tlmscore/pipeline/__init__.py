"""The pipeline over many transcripts: ingest → chains → convert → plan → fetch → render → score → rows.

`_one_run` is `tlmscore.run`, the library's one run: checkpoint, resume, calibration, the judge's
Batch API passes, and the output file, on an `Engine` (`Local`, or `tlmscore.ray.Engine`). `_run`
drives the stages chunk by chunk (each chunk on its own, so an engine can map the same functions
over partitions) and hands rows to a sink as each chunk completes. The functions here are also
`tlmscore.prepare`, `tlmscore.score` and their async forms.
"""

from __future__ import annotations

from tlmscore.output import ROW_COLUMNS, SCORE_COLUMNS
from tlmscore.pipeline._one_run import Engine, Job, Local, RunResult, run
from tlmscore.pipeline._run import aiter_rows, aprepare, ascore, prepare, score

__all__ = ["ROW_COLUMNS", "SCORE_COLUMNS", "Engine", "Job", "Local", "RunResult", "aiter_rows", "aprepare", "ascore",
           "prepare", "run", "score"]
