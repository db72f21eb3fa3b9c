"""Ingest: log files and in-memory records become `Transcript`s, one per record, errors included.

Reading is lenient to schema drift (fields are checked where they are used, not against one SDK
version's types) and streamed: a JSONL file is read line by line, never all at once. `scan` is the
one walk over a source's records (files of either kind, records in memory, lists of both); the
reader of a batch and the chain index both use it, and `load_at` reads a record again at the place
`scan` gave it. A file's reader is the caller's to find (`Find`: `tlmscore.stores.find_reader`, the
one table of readers): ingest sees only a narrow `Reader` and imports no store.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tlmscore._contract import Read, is_live
from tlmscore.errors import TranscriptError
from tlmscore.ingest._batch_api import BatchInputs
from tlmscore.ingest._ids import input_names, with_input_id
from tlmscore.ingest._logfile import (
    RandomAccess,
    ReadStoppedError,
    is_jsonl,
    json_file_records,
    lines,
    load_line,
)
from tlmscore.ingest._normalize import normalize_record
from tlmscore.ingest._streams import is_event, is_sse_line, stream_records
from tlmscore.model import Transcript

Inputs = str | Path | dict[str, Any] | Iterable[Any] | Any
"""What a run reads: a path, a live source's address, a record, an SDK `Response`, or an iterable of those."""
Look = Callable[[bytes], bool]
"""A quick check of a raw JSONL line: only lines it passes are parsed (see `scan`)."""


class Reader(Protocol):
    """What ingest needs of a reader of logs (`tlmscore.stores.SourceReader`): its name, and its records."""

    @property
    def name(self) -> str: ...

    @property
    def read(self) -> Callable[[str], Iterator[Read]]: ...


Find = Callable[[str], Reader | None]
"""The reader of a file (by its content) or a live address; None: a file of transcript records."""


def no_reader(_address: str) -> None:
    """The `Find` of a caller that knows no readers: every file is read by its kind."""


@dataclass(frozen=True)
class Location:
    """Where a record is: a file and line (with the line's byte offset), or a record held in memory."""

    source: str
    line: int
    offset: int = -1
    record: Any = None


def _failed(source: str, line: int, message: str) -> Transcript:
    return Transcript(id=f"{source}:{line}", source=source, line=line, error=f"{source}:{line}: {message}")


def _stopped(name: str, line: int, good: int, offset: int, cause: str) -> tuple[Location, Transcript]:
    """The error record of a file whose reading broke off after line `good`, ending at byte `offset`."""
    message = f"reading stopped after line {good} (byte {offset}): {cause}; the rest of the file is not read"
    return Location(name, line), _failed(name, line, message)


def _parsed(raw: bytes, name: str, number: int, batch: BatchInputs | None) -> Transcript:
    """One raw JSONL line as a transcript; a line that is not JSON becomes an error transcript."""
    try:
        obj = load_line(raw)
    except UnicodeDecodeError as exc:
        return _failed(name, number, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
    except json.JSONDecodeError as exc:
        return _failed(name, number, f"invalid JSON: {exc.msg} at column {exc.colno}")
    return normalize_record(obj, source=name, line=number, batch=batch)


def _jsonl_records(path: Path, name: str, batch: BatchInputs | None,
                   look: Look | None) -> Iterator[tuple[Location, Transcript]]:
    """The lines of a JSONL file; where reading breaks off, one error record says so.

    A file that breaks before its first line is unreadable: `TranscriptError`, not a row. Each
    record is handed on once the next line has been read, so that when reading breaks off, a last
    line that does not parse (bytes a damaged stream decoded to) is not a record of its own: the
    error record takes its place.
    """
    held: tuple[Location, Transcript] | None = None
    try:
        for number, offset, raw in lines(path):
            if raw.strip() and (look is None or look(raw)):
                if held is not None:
                    yield held
                held = Location(name, number, offset), _parsed(raw, name, number, batch)
    except ReadStoppedError as stop:
        if stop.lines_read == 0:
            raise TranscriptError(f"{name}: unreadable: {stop.cause}") from None
        line, good, offset = stop.lines_read + 1, stop.lines_read, stop.offset
        if held is not None and held[1].error is not None and held[0].line == stop.lines_read:
            line, good, offset = held[0].line, held[0].line - 1, held[0].offset
        elif held is not None:
            yield held
        held = None
        yield _stopped(name, line, good, offset, stop.cause)
    if held is not None:
        yield held


def _json_records(path: Path, name: str, batch: BatchInputs | None) -> Iterator[tuple[Location, Transcript]]:
    try:
        items = json_file_records(path)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", 1)
        yield Location(name, line), _failed(name, line, f"invalid JSON: {getattr(exc, 'msg', exc)}")
        return
    for number, item in enumerate(items, start=1):
        yield Location(name, number), normalize_record(item, source=name, line=number, batch=batch)


def _first_line(path: Path) -> bytes:
    """The first line of a file that is not blank (empty when there is none, or it cannot be read).

    A file that cannot be read is left to the record readers, which report it.
    """
    try:
        return next((raw for _, _, raw in lines(path) if raw.strip()), b"")
    except (TranscriptError, ReadStoppedError):
        return b""


def _first_object(first: bytes) -> dict[str, Any] | None:
    """The first line as a JSON object, or None (only a line that opens with `{` is parsed, once)."""
    if not first.lstrip().startswith(b"{"):
        return None
    try:
        value = load_line(first)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _kind(path: Path) -> str:
    """How a plain file is read, by its first line: `sse` or `events` (a stream), `jsonl`, or `json`.

    A file whose first line is a whole JSON object is JSON lines whatever its name; a file named
    `.jsonl` or `.ndjson` is JSON lines even when its first line is not (that line is an error row).
    """
    first = _first_line(path)
    if is_sse_line(first):
        return "sse"
    found = _first_object(first)
    if found is not None and is_event(found):
        return "events"
    return "jsonl" if found is not None or is_jsonl(path) else "json"


def _stream_file(path: Path, name: str, sse: bool) -> Iterator[tuple[Location, Transcript]]:
    """The records of an event stream file: one per streamed response, kept in memory for `load_at`.

    Where reading breaks off, the responses open are kept as cut off, and one error record says where.
    """
    stop: list[ReadStoppedError] = []

    def numbered() -> Iterator[tuple[int, bytes]]:
        try:
            for number, _, raw in lines(path):
                yield number, raw
        except ReadStoppedError as exc:
            stop.append(exc)

    for line, out in stream_records(numbered(), sse=sse):
        if isinstance(out, str):
            yield Location(name, line), _failed(name, line, out)
        else:
            yield Location(name, line, record=out), normalize_record(out, source=name, line=line)
    for cut in stop:
        yield _stopped(name, cut.lines_read + 1, cut.lines_read, cut.offset, cut.cause)


def _from_source(reader: Reader, address: str, batch: BatchInputs | None,
                 name: str) -> Iterator[tuple[Location, Transcript]]:
    """The records a source reader finds at `address` (named `name`), held in their locations (for `load_at`)."""
    try:
        for found in reader.read(address):
            if found.record is None:
                yield Location(name, found.line), _failed(name, found.line, found.error or "unreadable record")
            else:
                yield (Location(name, found.line, record=found.record),
                       normalize_record(found.record, source=name, line=found.line, batch=batch))
    except TranscriptError:
        raise
    except (OSError, ValueError) as exc:
        raise TranscriptError(f"{name}: unreadable as {reader.name}: {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True)
class Input:
    """One input file or live source, as decided once where it enters: how it is read.

    By `reader`, a source reader; a plain file by its `kind`: `sse` or `events` (a stream), `jsonl` or `json`.
    """

    given: str | Path
    reader: Reader | None = None
    kind: str = ""


def decide(given: str | Path, find: Find = no_reader, name: str | None = None) -> Input:
    """How `given` is read: by the reader `find` gives for its address or content, else by its kind.

    A file that is not there is a `TranscriptError` naming it as `name`.
    """
    if isinstance(given, str) and is_live(given):
        reader = find(given)
        if reader is not None:
            return Input(given, reader)
    path = Path(given)
    if not path.is_file():
        raise TranscriptError(f"{str(given) if name is None else name}: no such file")
    reader = find(str(path))
    return Input(given, reader) if reader is not None else Input(given, kind=_kind(path))


def decided(source: Inputs, find: Find = no_reader) -> Inputs:
    """`source` with each path or address decided once (`Input`), for a run that reads it more than once.

    One that cannot be decided yet (not there) is left as given: reading it says so where it did.
    """
    if not isinstance(source, (str, Path, list, tuple)):
        return source
    items = [source] if isinstance(source, (str, Path)) else list(source)
    out: list[Any] = []
    for item in items:
        try:
            out.append(decide(item, find) if isinstance(item, (str, Path)) else item)
        except TranscriptError:
            out.append(item)
    return out


def _file(given: str | Path | Input, batch: BatchInputs | None, look: Look | None,
          find: Find, name: str | None = None) -> Iterator[tuple[Location, Transcript]]:
    """The records of one file (or live source), named as given or `name` (so locations and transcripts agree).

    A file `find` gives a reader for is read by it; an event stream gives one record per streamed
    response; any other file is read as transcript records.
    """
    found = given if isinstance(given, Input) else decide(given, find, name)
    label = str(found.given) if name is None else name
    if found.reader is not None:
        yield from _from_source(found.reader, str(found.given), batch, label)
        return
    path, kind = Path(found.given), found.kind
    if kind in ("sse", "events"):
        yield from _stream_file(path, label, kind == "sse")
    elif kind == "jsonl":
        yield from _jsonl_records(path, label, batch, look)
    else:
        yield from _json_records(path, label, batch)


def scan(source: Inputs, batch: BatchInputs | None = None, look: Look | None = None,
         find: Find = no_reader, *, name: str | None = None) -> Iterator[tuple[Location, Transcript]]:
    """Every record of `source` with its location, in order; bad records carry `error`.

    With `look`, a JSONL line is parsed only when `look(raw)` is true (others are passed over
    without a row): the chain index uses it to find the few records it needs quickly. `find`
    gives a file's reader (see `decide`). `name` is what a single file is called in rows and
    messages (else its path as given).
    """
    if isinstance(source, (str, Path, Input)):
        yield from _file(source, batch, look, find, name)
        return
    if isinstance(source, dict) or hasattr(source, "model_dump"):
        source = [source]
    for number, item in enumerate(source, start=1):
        if isinstance(item, (str, Path, Input)):
            yield from _file(item, batch, look, find)
        else:
            yield (Location("<records>", number, record=item),
                   normalize_record(item, source="<records>", line=number, batch=batch))


def load_at(location: Location, files: RandomAccess, batch: BatchInputs | None = None) -> Transcript:
    """The record at `location` (from `scan`) read again: from memory, or from its file via `files`."""
    if location.record is not None or location.source == "<records>":
        return normalize_record(location.record, source=location.source, line=location.line, batch=batch)
    path = Path(location.source)
    if location.offset < 0:
        records = files.json_records(path)
        if not 0 < location.line <= len(records):
            return _failed(location.source, location.line, "record not found")
        return normalize_record(records[location.line - 1], source=location.source, line=location.line, batch=batch)
    raw = files.line(path, location.offset)
    return _parsed(raw, location.source, location.line, batch)


def read_located(source: Inputs, *, batch_inputs: Sequence[str | Path] | BatchInputs = (),
                 find: Find = no_reader) -> Iterator[tuple[Location, Transcript]]:
    """`tlmscore.read_transcripts`, each record with its `Location` (a line's byte offset: how far a run has read)."""
    batch = batch_inputs if isinstance(batch_inputs, BatchInputs) else (
        BatchInputs(batch_inputs) if batch_inputs else None)
    files = [source] if isinstance(source, (str, Path, Input)) else source if isinstance(source, (list, tuple)) else []
    names = input_names(item.given if isinstance(item, Input) else item for item in files
                        if isinstance(item, (str, Path, Input)))
    for location, transcript in scan(source, batch, find=find):
        yield location, with_input_id(transcript, names)
