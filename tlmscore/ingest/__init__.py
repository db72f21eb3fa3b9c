"""Ingest: log files and records become `Transcript`s, one per record, errors included.

- `_records`: the record formats (Responses, Chat Completions, Batch API output, bare Responses),
  read leniently and streamed; `read_transcripts` is the public reader, `normalize_record` reads one
  record (a dict) as a `Transcript`.
- `_batch_api`: OpenAI Batch API input files, joined to output lines by `custom_id`.
- `_logfile`: log files as bytes (gzip included), lines with their offsets, random access.
- `_history`: what an earlier call contributes to a follow-up's context (`previous_response_id`,
  `conversation`, `item_reference`); `_chains`: `ChainIndex`, which finds those records across
  every input of a run.
"""

from __future__ import annotations

from tlmscore.ingest._batch_api import BatchInputs
from tlmscore.ingest._chains import ChainIndex
from tlmscore.ingest._history import History, with_history
from tlmscore.ingest._logfile import check_readable, load_line, safe_text
from tlmscore.ingest._records import normalize_record, read_transcripts

__all__ = ["BatchInputs", "ChainIndex", "History", "check_readable", "load_line", "normalize_record",
           "read_transcripts", "safe_text", "with_history"]
