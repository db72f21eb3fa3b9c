"""Writers: rows to one file (JSONL, CSV, Parquet), and chunks written while the next is prepared.

How a row is encoded is `_encoding`'s. pyarrow is imported only when a Parquet file is written or
read, so a run writing JSONL does not pay for it at start-up.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tlmscore.output import _encoding as encoding
from tlmscore.output._encoding import arrow_table, builtin_format, json_line

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq


class RowWriter:
    """Writes rows to one file in the format its suffix names; call `write` per chunk, then `close`.

    `columns` are the columns of a file that gets no rows: a CSV header, a Parquet schema (typed as
    rows would be), so it still reads as a table (JSON lines have no header: an empty file); `fmt`
    (one of `FORMATS`) writes that format whatever the suffix. `append` adds to a JSONL or CSV file
    (a CSV keeps the header it has, the columns it names): how a checkpoint grows chunk by chunk.
    """

    def __init__(self, path: Path, columns: Sequence[str] = (), fmt: str | None = None, *,
                 append: bool = False) -> None:
        self.path = path
        self._append = append
        self.format = builtin_format(path) if fmt is None else builtin_format(Path("rows" + fmt))
        self._file: IO[Any] | None = None
        self._csv: Any = None
        self._parquet: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None
        self._closed = False
        self._columns = tuple(columns)

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append rows to the file."""
        if not rows:
            return
        if self._closed:
            raise ValueError(f"{self.path}: the writer is closed")
        if self.format == ".jsonl":
            self._write_jsonl(rows)
        elif self.format == ".csv":
            self._write_csv(rows)
        else:
            self._write_parquet(rows)

    def _open(self) -> IO[Any]:
        """The JSONL (bytes) or CSV (text) file, opened when first written to (appended to, with `append`)."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            mode = "a" if self._append else "w"
            self._file = (self.path.open(mode + "b") if self.format == ".jsonl"
                          else self.path.open(mode, encoding="utf-8", newline=""))
        return self._file

    def _write_jsonl(self, rows: list[dict[str, Any]]) -> None:
        handle = self._open()
        handle.writelines(json_line(row) for row in rows)
        handle.flush()

    def _write_csv(self, rows: list[dict[str, Any]]) -> None:
        kept = self._kept_header()
        handle = self._open()
        if self._csv is None:
            self._csv = csv.DictWriter(handle, fieldnames=kept or list(rows[0].keys()), extrasaction="ignore")
            if not kept:
                self._csv.writeheader()
        self._csv.writerows({k: encoding.cell(v) for k, v in row.items()} for row in rows)
        handle.flush()

    def _kept_header(self) -> list[str] | None:
        """The header of the CSV file appended to, None when there is none yet."""
        if self._csv is not None or not self._append or not self.path.is_file() or not self.path.stat().st_size:
            return None
        with self.path.open(encoding="utf-8", newline="") as handle:
            return next(csv.reader(handle))

    def sync(self) -> None:
        """Make what was written so far durable (flushed and synced), so a kill cannot lose it."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def _write_parquet(self, rows: list[dict[str, Any]]) -> None:
        import pyarrow.parquet as pq  # noqa: PLC0415  (see the module docstring)

        table = arrow_table(rows, self._schema)
        if self._parquet is None:
            self._schema = table.schema
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._parquet = pq.ParquetWriter(str(self.path), table.schema, **encoding.parquet_options())
        self._parquet.write_table(table)

    def close(self) -> None:
        """Finish the file; an empty run still leaves a valid empty file. Closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self.format == ".parquet" and self._parquet is None:
            import pyarrow.parquet as pq  # noqa: PLC0415

            self.path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(encoding.arrow_schema(list(self._columns)).empty_table(), str(self.path),
                           **encoding.parquet_options())
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        if self.format == ".csv" and self._csv is None and self._columns and not self._kept_header():
            csv.writer(self._open()).writerow(self._columns)  # no rows: the header alone
        if self.format != ".parquet":
            self._open().close()  # opened first if no row came: an empty file
            self._file = None
