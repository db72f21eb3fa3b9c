"""Sources: where logs are read from, each kind by a reader that yields transcript records.

The generic reading lives here; each trace store's own reading (live servers, a store's
exports) is its connector's, in `tlmscore.stores`.

- `registry`: `SourceReader`, the readers of no one store (`GENERIC`), `is_live` and `scheme` (a
  live source's address), and `with_window`, which puts the command line's `--since`, `--until`,
  `--limit` into such an address. Every reader (the stores' and plug-ins' too) and `find_reader`,
  which picks a file's reader by its content, are `tlmscore.stores`'.
- `_tables`: span and observation exports as records (`read_rows`) and `Peek`, what detection by
  content looks at; the table files themselves (JSON lines, JSON, Parquet, CSV, streamed: `rows`,
  `table_kind`, `plain`) are read by `tlmscore._tables`, which output files read back share.
- `_openinference`: OpenInference spans (`spans_records`), as Phoenix exports and serves them.
- `_otlp`, `_genai`: OTLP traces with GenAI spans; `_otlp_logs`: the GenAI log events joined to
  their spans (and a logs file read alone); `_uploads`: content the completion hook uploaded;
  `_genai_openai`: what `opentelemetry-instrumentation-genai-openai` writes, read back.

A reader's records are ingest's to normalise, so a call renders the same prompt whichever
place it was read from.
"""

from __future__ import annotations

from tlmscore._tables import json_cell, plain, rows, table_kind
from tlmscore.sources._openinference import spans_records
from tlmscore.sources._otlp import any_value, attributes_of
from tlmscore.sources._tables import peek, read_rows
from tlmscore.sources.registry import (
    GENERIC,
    SOURCES_GROUP,
    Peek,
    Read,
    SourceReader,
    is_live,
    scheme,
    with_window,
)

__all__ = ["GENERIC", "SOURCES_GROUP", "Peek", "Read", "SourceReader", "any_value", "attributes_of", "is_live",
           "json_cell", "peek", "plain", "read_rows", "rows", "scheme", "spans_records", "table_kind", "with_window"]
