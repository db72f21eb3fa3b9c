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

_HOMES = {name: home for home, names in {
    "tlmscore.convert.context": ("ItemConverter",),
    "tlmscore.errors": ("ConfigError", "FetchError", "ScorerError", "TlmscoreError", "TranscriptError"),
    "tlmscore.evidence.page": ("MemoryPages", "Page", "PageSource"),
    "tlmscore.ingest": ("BatchInputs",),
    "tlmscore.model": ("Conversation", "ScoringInput", "Transcript"),
    "tlmscore.output": ("Row", "RowSink"),
    "tlmscore.pipeline": ("Engine", "Local", "RunResult", "aiter_rows", "aprepare", "ascore", "prepare",
                          "read_transcripts", "run", "score"),
    "tlmscore.rendering": ("render",),
    "tlmscore.scoring.base": ("Score", "Scorer"),
    "tlmscore.scoring.calibration": ("Calibration",),
    "tlmscore.settings": ("Settings",),
    "tlmscore.watch": ("watch",),
}.items() for name in names}


__getattr__, __dir__ = _lazy_exports(__name__, _HOMES, __all__, globals())
