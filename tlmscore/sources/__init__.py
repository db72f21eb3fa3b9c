"""Sources: where logs are read from, each kind by a reader that yields transcript records.

The generic reading lives here; each trace store's own reading (live servers, a store's
exports) is its connector's, in `tlmscore.stores`.

- `registry`: `SourceReader`, the readers of no one store (`REGISTRY`), every installed reader
  (`readers`, the stores' and the `tlmscore.sources` entry points' too), and `find_reader`, which
  picks a file's reader by its content (or by name); `with_window` puts the command line's
  `--since`, `--until`, `--limit` into a live source's address.
- `_tables`: span and observation exports as records (`read_rows`) and `Peek`, what detection by
  content looks at; the table files themselves (JSON lines, JSON, Parquet, CSV, streamed: `rows`,
  `table_kind`, `plain`) are read by `tlmscore._tables`, which output files read back share.
- `_openinference`: OpenInference spans (`spans_records`), as Phoenix exports and serves them.
- `_otlp`, `_genai`: OTLP traces with GenAI spans (`as_value`: an attribute's JSON text, parsed).

A reader's records are ingest's to normalise, so a call renders the same prompt whichever
place it was read from.
"""

from __future__ import annotations

import typing as _typing

from tlmscore._lazy import lazy_exports as _lazy_exports
from tlmscore._tables import plain, rows, table_kind
from tlmscore.sources._genai import as_value
from tlmscore.sources._openinference import spans_records
from tlmscore.sources._tables import read_rows
from tlmscore.sources.registry import (
    GENERIC,
    Peek,
    Read,
    SourceReader,
    find_reader,
    is_live,
    readers,
    with_window,
)

if _typing.TYPE_CHECKING:
    from tlmscore.sources.registry import REGISTRY

__all__ = ["GENERIC", "REGISTRY", "Peek", "Read", "SourceReader", "as_value", "find_reader", "is_live", "plain",
           "read_rows", "readers", "rows", "spans_records", "table_kind", "with_window"]

# `REGISTRY` holds the stores' readers, and the stores read through this package: made when first asked for.
__getattr__, __dir__ = _lazy_exports(__name__, {"REGISTRY": "tlmscore.sources.registry"}, __all__, globals())
