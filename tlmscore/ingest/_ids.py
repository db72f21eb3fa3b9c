"""A record's id when it has none of its own: its file, named relative to the run's inputs, and its line.

The file is named as the run's inputs place it, not as it was typed: the same log scored from two
checkouts (`/ci/123/logs/a.jsonl`, `logs/a.jsonl`) gives the same ids (`a.jsonl:7`), so two runs
join on `id`. Inputs in several folders are named from the folder they share (`day1/a.jsonl`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from tlmscore._contract import is_live
from tlmscore.model import Transcript


def input_names(inputs: Iterable[str | Path]) -> dict[str, str]:
    """Each input file as typed → its path relative to the folder all the inputs share (its name when alone)."""
    files = {str(item): Path(item).resolve() for item in inputs if not (isinstance(item, str) and is_live(item))}
    if not files:
        return {}
    shared = Path(os.path.commonpath([path.parent for path in files.values()]))
    return {given: path.relative_to(shared).as_posix() for given, path in files.items()}


def made_up_id(transcript: Transcript) -> bool:
    """Whether the record's id is its location (`<file>:<line>`), the record having none of its own."""
    return transcript.id == f"{transcript.source}:{transcript.line}"


def with_input_id(transcript: Transcript, names: Mapping[str, str]) -> Transcript:
    """`transcript` with a made-up id naming its file as `names` does; an id of its own is kept."""
    name = names.get(transcript.source)
    if name is None or not made_up_id(transcript):
        return transcript
    return replace(transcript, id=f"{name}:{transcript.line}")
