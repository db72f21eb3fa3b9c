"""Output: rows to files (JSONL, CSV, Parquet) as each chunk completes, and what makes `--resume` safe.

- `_encoding`: rows as JSON lines, CSV cells, Arrow tables (pure).
- `_writers`: `RowWriter`, rows to one file.
- `_checkpoint`: rows saved and synced chunk by chunk, so a killed run loses at most one chunk.
- `_manifest`: what a run read and how, checked by `--resume`.
"""

from __future__ import annotations

from tlmscore.output._checkpoint import Checkpoint
from tlmscore.output._encoding import FORMATS, output_format
from tlmscore.output._manifest import build_manifest, describe_file, start_run
from tlmscore.output._writers import RowWriter

__all__ = ["FORMATS", "Checkpoint", "RowWriter", "build_manifest", "describe_file", "output_format", "start_run"]
