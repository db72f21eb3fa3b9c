"""Output: final rows (`Row`) to sinks (JSONL, CSV, Parquet, plug-ins), and what makes `--resume` safe.

- `_row`: `Row`, one output row, typed and frozen; `to_record` is the contract's dict.
- `_sinks`: `RowSink`, the built-in file sinks, the `tlmscore.sinks` entry points.
- `_encoding`: rows as JSON lines, CSV cells, Arrow tables (pure; `arrow_table`).
- `_writers`: `RowWriter`, row records to one file (what the file sinks and the checkpoint write with).
- `_checkpoint`: rows saved and synced chunk by chunk, so a killed run loses at most one chunk.
- `_manifest`: what a run read and how, checked by `--resume`.
- `_run_output`: `RunOutput`, the file a run writes resumably: manifest, checkpoint and output in one.
- `_read`: `read_rows`, the one reader of output files back into `Row`s (compare, calibrate, annotate, resume).
"""

from __future__ import annotations

from tlmscore.output._checkpoint import Checkpoint, Done, checkpoint_path
from tlmscore.output._encoding import FORMATS, arrow_table
from tlmscore.output._manifest import build_manifest, describe_file, manifest_path, start_run
from tlmscore.output._read import read_rows, score_of
from tlmscore.output._row import CALIBRATED_COLUMN, COLUMN_KINDS, ROW_COLUMNS, SCORE_COLUMNS, Row, column_kind
from tlmscore.output._run_output import RunOutput
from tlmscore.output._sinks import (
    ENTRY_POINT_GROUP,
    PLUGINS,
    SINKS,
    CsvSink,
    FileSink,
    JsonlSink,
    ParquetSink,
    RowSink,
    SinkFactory,
    open_sink,
    output_format,
    sinks,
)
from tlmscore.output._writers import RowWriter

__all__ = [
    "CALIBRATED_COLUMN",
    "COLUMN_KINDS",
    "ENTRY_POINT_GROUP",
    "FORMATS",
    "PLUGINS",
    "ROW_COLUMNS",
    "SCORE_COLUMNS",
    "SINKS",
    "Checkpoint",
    "CsvSink",
    "Done",
    "FileSink",
    "JsonlSink",
    "ParquetSink",
    "Row",
    "RowSink",
    "RowWriter",
    "RunOutput",
    "SinkFactory",
    "arrow_table",
    "build_manifest",
    "checkpoint_path",
    "column_kind",
    "describe_file",
    "manifest_path",
    "open_sink",
    "output_format",
    "read_rows",
    "score_of",
    "sinks",
    "start_run",
]
