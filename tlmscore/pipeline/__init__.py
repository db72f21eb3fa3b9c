"""The pipeline over many transcripts: ingest → chains → convert → plan → fetch → render → score → rows.

`_run` is `tlmscore.run`, the library's one run: checkpoint, resume, calibration, a scorer's two
passes, and the output file, on an `Engine` (`Local`, or `tlmscore.ray.Engine`). `_stages` drives the
stages chunk by chunk (each chunk on its own, so an engine can map the same functions over
partitions) and hands rows to a sink as each chunk completes. `_frames` is `tlmscore.prepare`,
`tlmscore.score` and their async forms: the same run with no output file, and `read_transcripts`
(the records alone). For the later stages: `aiter_chunks` (rows chunk by chunk), `run_sync` (a
coroutine run to its end, inside a running event loop too), and `convert_record`, `record_row`,
`score_rows`, a chunk's steps one record at a time (the Ray engine's). `_scoring` scores a chunk in
this process, or a CPU-bound scorer's in worker processes on every core (`Scoring`).
"""

from __future__ import annotations

from tlmscore.output import ROW_COLUMNS, SCORE_COLUMNS
from tlmscore.pipeline._frames import Pages, aiter_rows, aprepare, ascore, frame, prepare, read_transcripts, score
from tlmscore.pipeline._run import Engine, Job, Local, RunResult, run
from tlmscore.pipeline._scoring import POOLED_AT_LEAST, Scoring
from tlmscore.pipeline._stages import aiter_chunks, convert_record, record_row, run_sync, score_rows

__all__ = [
    "POOLED_AT_LEAST",
    "ROW_COLUMNS",
    "SCORE_COLUMNS",
    "Engine",
    "Job",
    "Local",
    "Pages",
    "RunResult",
    "Scoring",
    "aiter_chunks",
    "aiter_rows",
    "aprepare",
    "ascore",
    "convert_record",
    "frame",
    "prepare",
    "read_transcripts",
    "record_row",
    "run",
    "run_sync",
    "score",
    "score_rows",
]
