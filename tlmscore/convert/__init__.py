"""Convert: transcript items become turns. Pure: no IO, the same input gives the same conversation.

- `_walk`: the walk over a transcript's items (`convert_transcript`, `convert_chat`, `convert_items`).
- `registry`, `context`: item type → converter; what a converter gets (public: plug-ins use them).
- one module per item family (`_messages`, `_web`, `_files`, `_code`, `_mcp`, `_shell`, …), `_citations`
  (every citation style); a transcript's status is ingest's (`Transcript.status`), only read here.
"""

from __future__ import annotations

from tlmscore._think import split_think
from tlmscore.convert._citations import cited_sentence
from tlmscore.convert._files import FILE_SEARCH_NOT_LOGGED
from tlmscore.convert._outputs import NOT_LOGGED
from tlmscore.convert._walk import (
    NO_REQUEST,
    cited_files,
    convert_chat,
    convert_items,
    convert_transcript,
    input_items,
    split_answer,
)
from tlmscore.convert._web import SEARCH_NOT_LOGGED, UNCITED
from tlmscore.convert.registry import REGISTRY

__all__ = [
    "FILE_SEARCH_NOT_LOGGED",
    "NOT_LOGGED",
    "NO_REQUEST",
    "REGISTRY",
    "SEARCH_NOT_LOGGED",
    "UNCITED",
    "cited_files",
    "cited_sentence",
    "convert_chat",
    "convert_items",
    "convert_transcript",
    "input_items",
    "split_answer",
    "split_think",
]
