"""Log files as bytes: opening (gzip included), lines with their offsets, JSON parsing, random access.

This is the one place that reads transcript files: `tlmscore.ingest._records` turns what it reads into
records, and `tlmscore.ingest._chains` looks records up again by the places noted here.

A file that cannot be read at all raises `TranscriptError`. A gzipped file that breaks part-way
(truncated, corrupt, or followed by bytes that are not gzip) raises `ReadStoppedError`, which says how
many lines were read before, so a reader can keep them and report where reading stopped.
"""

from __future__ import annotations

import codecs
import json
import re
import shutil
import tempfile
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from tlmscore.errors import TranscriptError
from tlmscore.ingest._gzip import open_gzip

READ_ERRORS = (OSError, EOFError, zlib.error)
"""What reading a damaged file raises: `gzip.BadGzipFile` is an `OSError`, a truncated stream `EOFError`."""
_BOM = codecs.BOM_UTF8
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class ReadStoppedError(TranscriptError):
    """Reading a file failed after `lines_read` lines (ending at byte `offset` of the decompressed data)."""

    def __init__(self, path: Path, lines_read: int, offset: int, cause: BaseException) -> None:
        self.lines_read = lines_read
        self.offset = offset
        self.cause = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        super().__init__(f"{path}: unreadable: {self.cause}")


def gzipped(path: Path) -> bool:
    """Whether a log file is read gzip-decompressed: its name ends in `.gz` (its bytes are not looked at)."""
    return path.suffix == ".gz"


def open_log(path: Path) -> IO[bytes]:
    """A log file opened for binary reading, gzip-decompressed when it ends in `.gz`."""
    if gzipped(path):
        return open_gzip(path)
    return path.open("rb")


def check_readable(path: Path) -> None:
    """Raise `TranscriptError` for a file whose start cannot be read (a `.gz` that is not gzip, say).

    A quick check before a run starts; a file that breaks later is reported where it breaks.
    """
    try:
        with open_log(path) as handle:
            handle.read(1)
    except READ_ERRORS as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise TranscriptError(f"{path}: unreadable: {type(exc).__name__}: {reason}") from None


def is_jsonl(path: Path) -> bool:
    """Whether a file holds one record per line (`.jsonl`, `.ndjson`, optionally gzipped)."""
    inner = path.with_suffix("") if path.suffix.lower() == ".gz" else path
    return inner.suffix.lower() in (".jsonl", ".ndjson")


def lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """`(number, offset, raw)` of every line of a file, numbered from 1; a UTF-8 BOM is dropped.

    Raises `TranscriptError` when the file cannot be opened, `ReadStoppedError` when reading fails.
    """
    try:
        handle = open_log(path)
    except OSError as exc:
        raise TranscriptError(f"{path}: unreadable: {exc.strerror or exc}") from None
    number = offset = 0
    with handle:
        try:
            for raw in handle:
                number += 1
                yield number, offset, raw.removeprefix(_BOM) if number == 1 else raw
                offset += len(raw)
        except READ_ERRORS as exc:
            raise ReadStoppedError(path, number, offset, exc) from None


_DIGITS_AS_NINES = bytes.maketrans(b"0123456789", b"9" * 10)
_LONG_RUN = b"9" * 20


def _has_long_number(raw: bytes) -> bool:
    """Whether `raw` holds a run of 20 digits, too wide for orjson to read as an integer.

    Every digit becomes a 9 and a run of twenty 9s is searched for, which is much faster than the
    regular expression `[0-9]{20}`; the check is paid for every line of every batch.
    """
    return _LONG_RUN in raw.translate(_DIGITS_AS_NINES)


def safe_text(text: str) -> str:
    """`text` as valid Unicode: each lone surrogate (`json` reads one from an escape) becomes U+FFFD.

    A string with a lone surrogate cannot be encoded as UTF-8: not hashed for a cache key, not
    sent to a scorer, not written to any output format.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _without_surrogates(value: Any) -> Any:
    """`value` with `safe_text` applied to every string in it, keys included; iterative, as values may be deep."""
    if isinstance(value, str):
        return safe_text(value)
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            items = [(safe_text(k) if isinstance(k, str) else k, v) for k, v in node.items()]
            node.clear()
            node.update((k, safe_text(v) if isinstance(v, str) else v) for k, v in items)
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            node[:] = [safe_text(v) if isinstance(v, str) else v for v in node]
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return value


def _json_loads(text: str) -> Any:
    """`json.loads`, with nesting too deep as a `JSONDecodeError` and lone surrogates replaced."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply to read", text, 0) from None
    return _without_surrogates(value) if _SURROGATE_ESCAPE.search(text) else value


def load_line(raw: bytes) -> Any:
    """One JSONL line parsed: by orjson (several times faster), else by the standard library.

    What orjson refuses (invalid JSON, but also `NaN` or a lone surrogate, which `json` reads)
    goes through `json`, so the values read and the error messages are those of `json`. So does
    a line with a run of 20 digits: orjson would read an integer wider than 64 bits as a float.
    A value nested deeper than Python can recurse is a `json.JSONDecodeError` too, a lone surrogate
    becomes U+FFFD (see `safe_text`), and a UTF-8 BOM before the line is skipped.
    """
    raw = raw.removeprefix(_BOM)
    if not _has_long_number(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return _json_loads(raw.rstrip(b"\r\n").decode("utf-8"))


def json_file_records(path: Path) -> list[Any]:
    """The records of a `.json` file (optionally gzipped): an array of them, or one.

    Raises `UnicodeDecodeError` or `json.JSONDecodeError` for a file that is not UTF-8 JSON, and
    `TranscriptError` for a file that cannot be read.
    """
    try:
        with open_log(path) as handle:
            data = handle.read()
    except READ_ERRORS as exc:
        raise TranscriptError(f"{path}: unreadable: {type(exc).__name__}: {exc}") from None
    obj = _json_loads(data.decode("utf-8-sig"))
    return obj if isinstance(obj, list) else [obj]


class RandomAccess:
    """Lines of log files read again at the byte offsets `lines` gave, without re-reading from the start.

    A gzipped file cannot seek backwards without decompressing from its start again, so the first
    lookup in it decompresses it once into an anonymous temporary file (removed by the system
    when closed, also after a crash), and every later lookup seeks there. Plain files stay open.
    The records of the last `.json` file looked into are kept, so lookups there parse it once.
    Use it as a context manager, or call `close`.
    """

    def __init__(self) -> None:
        self._handles: dict[Path, IO[bytes]] = {}
        self._json: tuple[Path, list[Any]] | None = None
        self._lock = threading.Lock()  # a seek and its read belong together; the batch reads on a worker thread

    def __enter__(self) -> RandomAccess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self, path: Path, offset: int) -> bytes:
        """The line starting at byte `offset` of the (decompressed) file; empty past the end."""
        with self._lock:
            handle = self._handles.get(path)
            if handle is None:
                handle = self._handles[path] = self._open(path)
            handle.seek(offset)
            return handle.readline()

    def json_records(self, path: Path) -> list[Any]:
        """The records of a `.json` file, parsed once while it is the one being looked into."""
        with self._lock:
            if self._json is None or self._json[0] != path:
                try:
                    records = json_file_records(path)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    records = []
                self._json = (path, records)
            return self._json[1]

    @staticmethod
    def _open(path: Path) -> IO[bytes]:
        if not gzipped(path):
            return path.open("rb")
        copy = tempfile.TemporaryFile()  # noqa: SIM115  (kept open until `close`)
        try:
            with open_gzip(path) as source:
                shutil.copyfileobj(source, copy)
        except READ_ERRORS:
            pass  # the readable part is copied; offsets past it read as the end of the file
        return copy

    def close(self) -> None:
        """Close every file opened (and so remove the decompressed copies)."""
        with self._lock:
            handles, self._handles = self._handles, {}
            self._json = None
        for handle in handles.values():
            handle.close()
