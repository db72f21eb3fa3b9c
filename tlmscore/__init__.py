"""tlmscore: score logged OpenAI Responses API answers for trustworthiness, with their evidence.

The names below are imported on first use, so importing one stage (say, the extraction workers'
`tlmscore.evidence.extract`) does not load the whole pipeline.
"""

from __future__ import annotations

import typing as _typing

from tlmscore._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from tlmscore.convert.context import ItemConverter
    from tlmscore.errors import ConfigError, FetchError, ScorerError, TlmscoreError, TranscriptError
    from tlmscore.evidence.page import MemoryPages, Page, PageSource
    from tlmscore.ingest import BatchInputs
    from tlmscore.model import Conversation, ScoringInput, Transcript
    from tlmscore.output import Row, RowSink
    from tlmscore.pipeline import (
        Engine,
        Local,
        RunResult,
        aiter_rows,
        aprepare,
        ascore,
        prepare,
        read_transcripts,
        run,
        score,
    )
    from tlmscore.rendering import render
    from tlmscore.scoring.base import Score, Scorer
    from tlmscore.scoring.calibration import Calibration
    from tlmscore.settings import Settings
    from tlmscore.watch import watch

__all__ = [
    "BatchInputs",
    "Calibration",
    "ConfigError",
    "Conversation",
    "Engine",
    "FetchError",
    "ItemConverter",
    "Local",
    "MemoryPages",
    "Page",
    "PageSource",
    "Row",
    "RowSink",
    "RunResult",
    "Score",
    "Scorer",
    "ScorerError",
    "ScoringInput",
    "Settings",
    "TlmscoreError",
    "Transcript",
    "TranscriptError",
    "__version__",
    "aiter_rows",
    "aprepare",
    "ascore",
    "prepare",
    "read_transcripts",
    "render",
    "run",
    "score",
    "watch",
]

__version__ = "0.1.0"

_HOMES = {
    "aiter_rows": "tlmscore.pipeline",
    "aprepare": "tlmscore.pipeline",
    "ascore": "tlmscore.pipeline",
    "prepare": "tlmscore.pipeline",
    "score": "tlmscore.pipeline",
    "run": "tlmscore.pipeline",
    "RunResult": "tlmscore.pipeline",
    "Local": "tlmscore.pipeline",
    "Engine": "tlmscore.pipeline",
    "Calibration": "tlmscore.scoring.calibration",
    "Score": "tlmscore.scoring.base",
    "Scorer": "tlmscore.scoring.base",
    "ItemConverter": "tlmscore.convert.context",
    "ConfigError": "tlmscore.errors",
    "FetchError": "tlmscore.errors",
    "ScorerError": "tlmscore.errors",
    "TlmscoreError": "tlmscore.errors",
    "TranscriptError": "tlmscore.errors",
    "MemoryPages": "tlmscore.evidence.page",
    "Page": "tlmscore.evidence.page",
    "PageSource": "tlmscore.evidence.page",
    "Row": "tlmscore.output",
    "RowSink": "tlmscore.output",
    "Conversation": "tlmscore.model",
    "ScoringInput": "tlmscore.model",
    "Transcript": "tlmscore.model",
    "render": "tlmscore.rendering",
    "Settings": "tlmscore.settings",
    "read_transcripts": "tlmscore.pipeline",
    "BatchInputs": "tlmscore.ingest",
    "watch": "tlmscore.watch",
}


__getattr__, __dir__ = _lazy_exports(__name__, _HOMES, __all__, globals())
