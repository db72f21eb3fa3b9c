"""Ingest: log files and records become `Transcript`s, one per record, errors included.

- `_records`: files and records in memory read as records, streamed (`read_located`, `scan`), a
  file's reader given by the caller (`Find`, a narrow `Reader`: ingest imports no store);
  `_normalize`: the record formats (Responses, Chat Completions, Batch API output, bare Responses),
  read leniently: `normalize_record` reads one record (a dict) as a `Transcript`, its status decided once (`_status`).
- `_batch_api`: OpenAI Batch API input files, joined to output lines by `custom_id`.
- `_logfile`: log files as bytes (gzip included), lines with their offsets, random access.
- `_ids`: the id of a record that has none (its file named relative to the run's inputs, its line).
- `_history`: what an earlier call contributes to a follow-up's context (`previous_response_id`,
  `conversation`, `item_reference`); `_chains`: `ChainIndex`, which finds those records across
  every input of a run.

Later stages (convert, the pipeline, the engines) import what they use from here, not from the
private modules.
"""

from __future__ import annotations

from tlmscore.ingest._batch_api import BatchInputs
from tlmscore.ingest._chains import ChainIndex
from tlmscore.ingest._history import (
    History,
    call_input,
    conversation_id,
    own_items,
    previous_response_id,
    reference_ids,
    with_history,
)
from tlmscore.ingest._ids import input_names, made_up_id, with_input_id
from tlmscore.ingest._logfile import check_readable, gzipped, is_jsonl, load_line, safe_text
from tlmscore.ingest._normalize import normalize_record
from tlmscore.ingest._records import Find, Input, Inputs, Location, Reader, decide, decided, read_located, scan

__all__ = [
    "BatchInputs",
    "ChainIndex",
    "Find",
    "History",
    "Input",
    "Inputs",
    "Location",
    "Reader",
    "call_input",
    "check_readable",
    "conversation_id",
    "decide",
    "decided",
    "gzipped",
    "input_names",
    "is_jsonl",
    "load_line",
    "made_up_id",
    "normalize_record",
    "own_items",
    "previous_response_id",
    "read_located",
    "reference_ids",
    "safe_text",
    "scan",
    "with_history",
    "with_input_id",
]
