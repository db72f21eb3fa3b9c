"""Reading for a distributed engine: one input file becomes rows of parsed records, in a worker.

Each row is one input record: where it came from (`source` as given, `line`), its `position` in
the whole run (input number and line, so the single-machine order can be restored), and the
record itself, pickled (a JSON line may hold integers wider than Arrow's, and a record is handed
to `normalize_record` as it was read). A line that is not JSON keeps its error instead, worded as
the single-machine reader words it, so it becomes the same error row.

A local file is read by the single-machine reader itself (`tlmscore.ingest.scan`): JSON lines or a
JSON array, plain or gzip, event streams (one record per streamed response) and span exports (one
record per LLM span), with the same errors. A URI pyarrow reads (`s3://`, `gs://`, `hdfs://`) is
read as JSON lines or JSON (`.gz` decompressed). Parquet inputs hold one record per row: the
columns `request`, `response` and `metadata` may be JSON text or structs.
"""

from __future__ import annotations

import gzip
import json
import pickle
from collections.abc import Iterator
from functools import partial
from pathlib import Path, PurePosixPath
from typing import IO, Any

from tlmscore.errors import TlmscoreError
from tlmscore.ingest import BatchInputs, is_jsonl, load_line, normalize_record, scan
from tlmscore.model import Transcript
from tlmscore.stores import find_reader

LINE_BITS = 32
"""A row's position is `input << LINE_BITS | line`: input order, then line order."""
_JSON_COLUMNS = ("request", "response", "metadata")


def position_of(input_index: int, line: int) -> int:
    """The sort key of a record: inputs in the order given, lines in file order."""
    return (input_index << LINE_BITS) | line


def input_rows(paths: list[str], fmt: str | None = None) -> list[dict[str, Any]]:
    """One row per input file (local paths made absolute, as workers have their own working directory).

    `fmt` names the source reader of every local file (`--format`); None: each file's content decides.
    """
    return [{"input": i, "path": p, "location": p if "://" in p else str(Path(p).resolve()), "format": fmt}
            for i, p in enumerate(paths)]


def _open(location: str) -> IO[bytes]:
    """A binary stream of `location`, from the local disk or any filesystem pyarrow knows."""
    if "://" not in location:
        raw: IO[bytes] = Path(location).open("rb")  # noqa: SIM115  (the caller closes it)
    else:
        import pyarrow.fs as pafs  # noqa: PLC0415  (only remote inputs need it)

        filesystem, path = pafs.FileSystem.from_uri(location)
        raw = filesystem.open_input_stream(path, compression=None)
    if location.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]  # a binary stream
    return raw


def _row(input_index: int, source: str, line: int, record: Any = None, error: str | None = None) -> dict[str, Any]:
    return {"input": input_index, "position": position_of(input_index, line), "source": source, "line": line,
            "record": pickle.dumps(record) if error is None else None, "error": error}


def _jsonl(input_index: int, source: str, handle: IO[bytes]) -> Iterator[dict[str, Any]]:
    for number, raw in enumerate(handle, start=1):
        if not raw.strip():
            continue
        try:
            yield _row(input_index, source, number, load_line(raw))
        except UnicodeDecodeError as exc:
            yield _row(input_index, source, number,
                       error=f"{source}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start})")
        except json.JSONDecodeError as exc:
            yield _row(input_index, source, number,
                       error=f"{source}:{number}: invalid JSON: {exc.msg} at column {exc.colno}")


def _json(input_index: int, source: str, handle: IO[bytes]) -> Iterator[dict[str, Any]]:
    try:
        obj = json.loads(handle.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", 1)
        yield _row(input_index, source, line, error=f"{source}:{line}: invalid JSON: {getattr(exc, 'msg', exc)}")
        return
    for number, item in enumerate(obj if isinstance(obj, list) else [obj], start=1):
        yield _row(input_index, source, number, item)


def _parquet_record(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row as a transcript record: JSON text columns parsed, missing fields left out."""
    record: dict[str, Any] = {}
    for name, value in row.items():
        if value is None:
            continue
        record[name] = json.loads(value) if name in _JSON_COLUMNS and isinstance(value, str) else value
    return record


def _parquet(input_index: int, source: str, location: str) -> Iterator[dict[str, Any]]:
    """Rows of a Parquet file, a row group at a time (opened for random access, not read whole)."""
    import pyarrow.fs as pafs  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    filesystem, path = pafs.FileSystem.from_uri(location if "://" in location else Path(location).as_uri())
    with filesystem.open_input_file(path) as handle:
        rows = (row for batch in pq.ParquetFile(handle).iter_batches() for row in batch.to_pylist())
        for number, row in enumerate(rows, start=1):
            try:
                yield _row(input_index, source, number, _parquet_record(row))
            except json.JSONDecodeError as exc:
                yield _row(input_index, source, number, error=f"{source}:{number}: invalid JSON: {exc.msg}")


def _scanned(index: int, source: str, location: str, fmt: str | None) -> Iterator[dict[str, Any]]:
    """A local file's records as one machine reads them; a record it could not read keeps its error."""
    for where, transcript in scan(location, find=partial(find_reader, fmt=fmt), name=source):
        record = where.record if where.record is not None else transcript.raw
        if record is None:
            yield _row(index, source, where.line, error=transcript.error or f"{source}:{where.line}: unreadable")
        else:
            yield _row(index, source, where.line, record)


def _rows_of(index: int, source: str, location: str, fmt: str | None = None) -> Iterator[dict[str, Any]]:
    if PurePosixPath(location).suffix.lower() == ".parquet":
        yield from _parquet(index, source, location)
        return
    if "://" not in location:
        yield from _scanned(index, source, location, fmt)
        return
    reader = _jsonl if is_jsonl(Path(PurePosixPath(location).name)) else _json
    with _open(location) as handle:
        yield from reader(index, source, handle)


def read_input(item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The record rows of one input file (a row of `input_rows`); used as a `flat_map` function.

    A file that cannot be read (missing, cut short, not Parquet) ends with an error row, placed
    after the last record read, so no row is lost and none shares another's position.
    """
    source, location, index = str(item["path"]), str(item["location"]), int(item["input"])
    last = 0
    try:
        for row in _rows_of(index, source, location, item.get("format")):
            last = int(row["line"])
            yield row
    except TlmscoreError as exc:
        yield _row(index, source, last + 1, error=str(exc))
    except (OSError, EOFError, ValueError) as exc:
        yield _row(index, source, last + 1, error=f"{source}: cannot read: {exc}")


def transcript_of(row: dict[str, Any], batch: BatchInputs | None = None) -> Transcript:
    """The transcript of a record row, as the single-machine reader makes it."""
    source, line = str(row["source"]), int(row["line"])
    if row.get("error"):
        return Transcript(id=f"{source}:{line}", source=source, line=line, error=str(row["error"]))
    return normalize_record(pickle.loads(row["record"]), source=source, line=line, batch=batch)  # noqa: S301  (rows this engine wrote)
