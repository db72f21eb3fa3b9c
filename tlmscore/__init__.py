"""tlmscore: score logged OpenAI Responses API answers for trustworthiness, with their evidence."""

from __future__ import annotations

from tlmscore.batch import prepare, score
from tlmscore.errors import ConfigError, FetchError, ScorerError, TlmscoreError, TranscriptError
from tlmscore.evidence.page import MemoryPages, Page, PageSource
from tlmscore.model import Conversation, ScoringInput, Transcript
from tlmscore.prompt import render
from tlmscore.settings import Settings
from tlmscore.transcripts import read_transcripts

__all__ = [
    "ConfigError",
    "Conversation",
    "FetchError",
    "MemoryPages",
    "Page",
    "PageSource",
    "ScorerError",
    "ScoringInput",
    "Settings",
    "TlmscoreError",
    "Transcript",
    "TranscriptError",
    "__version__",
    "prepare",
    "read_transcripts",
    "render",
    "score",
]

__version__ = "0.1.0"
