"""Ingest: log files and in-memory records become `Transcript`s, one per record, errors included.

Reading is lenient to schema drift (fields are checked where they are used, not against one SDK
version's types) and streamed: a JSONL file is read line by line, never all at once.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from tlmscore.errors import TranscriptError
from tlmscore.model import Transcript

__all__ = ["BatchInputs", "Source", "is_jsonl", "json_file_records", "load_line", "normalize_record", "open_log",
           "read_path", "read_transcripts"]

Source = str | Path | dict[str, Any] | Iterable[Any] | Any
_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*("(?:[^"\\]|\\.)*")')


class BatchInputs:
    """The request bodies of OpenAI Batch API input files, found by `custom_id` and read on demand.

    Input lines are `{"custom_id", "method", "url", "body"}`; only each line's place is kept in
    memory (custom_id → file and byte offset), so input files of any size can be joined.
    """

    def __init__(self, paths: Sequence[str | Path] = ()) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self._where: dict[str, tuple[int, int]] = {}
        for index, path in enumerate(self.paths):
            if not path.is_file():
                raise TranscriptError(f"{path}: no such batch input file")
            self._scan(index, path)

    def __len__(self) -> int:
        return len(self._where)

    def _scan(self, index: int, path: Path) -> None:
        offset = 0
        with open_log(path) as handle:
            for raw in handle:
                custom_id = self._custom_id(raw)
                if custom_id is not None:
                    self._where.setdefault(custom_id, (index, offset))
                offset += len(raw)

    @staticmethod
    def _custom_id(raw: bytes) -> str | None:
        match = _CUSTOM_ID.search(raw)
        try:
            if match is not None:
                return str(json.loads(match.group(1)))
            obj = json.loads(raw) if raw.strip() else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return str(obj["custom_id"]) if isinstance(obj, dict) and "custom_id" in obj else None

    def request(self, custom_id: str) -> dict[str, Any] | None:
        """The request body sent under `custom_id`, or None when no input line has it."""
        where = self._where.get(custom_id)
        if where is None:
            return None
        index, offset = where
        with open_log(self.paths[index]) as handle:
            handle.seek(offset)
            try:
                line = json.loads(handle.readline())
            except (json.JSONDecodeError, UnicodeDecodeError):
                return None
        body = line.get("body") if isinstance(line, dict) else None
        return body if isinstance(body, dict) else None


def _plain(obj: Any) -> Any:
    """SDK objects (pydantic models) as plain JSON-like dicts; anything else unchanged."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, type):
        return dump(mode="json", exclude_unset=True)
    return obj


def _api_error(record: dict[str, Any]) -> str | None:
    """The message of an API error object logged in place of a response, if that is what it is."""
    error = record.get("error")
    if isinstance(error, dict) and "output" not in record and "choices" not in record:
        return f"record is an API error, not a response: {error.get('message') or error}"
    return None


def _response_kind(response: dict[str, Any]) -> str:
    if response.get("object") == "chat.completion" or ("choices" in response and "output" not in response):
        return "chat"
    return "responses"


def _check_response(response: dict[str, Any], kind: str) -> None:
    if kind == "chat":
        choices = response.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise TranscriptError("chat completion has no choices")
        return
    if "output" not in response:
        raise TranscriptError("response has no 'output'")
    output = response["output"]
    if not isinstance(output, list):
        raise TranscriptError(f"response.output must be a list, not {type(output).__name__}")
    for i, item in enumerate(output):
        if not isinstance(item, dict):
            raise TranscriptError(f"response.output[{i}] is not an object")
        if not isinstance(item.get("type"), str):
            raise TranscriptError(f"response.output[{i}] has no 'type'")


def _unwrap(record: dict[str, Any],
            inputs: BatchInputs | None = None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(request, response, metadata) from any supported record shape.

    A Batch API output line gets its request from the batch input files when they are given.
    """
    message = _api_error(record)
    if message:
        raise TranscriptError(message)
    if "custom_id" in record and isinstance(record.get("response"), dict) and "body" in record["response"]:
        batch = record["response"]
        if batch.get("status_code") not in (None, 200) or record.get("error"):
            detail = record.get("error") or (batch.get("body") or {}).get("error") or batch.get("status_code")
            raise TranscriptError(f"batch request {record['custom_id']!r} failed: {detail}")
        custom_id = str(record["custom_id"])
        request = inputs.request(custom_id) if inputs is not None else None
        return request or {}, _plain(batch.get("body") or {}), {"custom_id": custom_id}
    if "response" in record or "request" in record:
        request, response = record.get("request", {}), _plain(record.get("response"))
        if not isinstance(request, dict):
            raise TranscriptError(f"'request' must be an object, not {type(request).__name__}")
        if not isinstance(response, dict):
            raise TranscriptError("record has no 'response' object")
        metadata = record.get("metadata") or {}
        return request, response, metadata if isinstance(metadata, dict) else {"value": metadata}
    return {}, record, {}


def normalize_record(obj: Any, *, source: str, line: int, batch: BatchInputs | None = None) -> Transcript:
    """One record as a `Transcript`; a record that cannot be used becomes an error transcript."""
    record = _plain(obj)
    rid = f"{source}:{line}"
    if not isinstance(record, dict):
        return Transcript(id=rid, source=source, line=line, raw=record,
                          error=f"{rid}: record must be a JSON object, not {type(record).__name__}")
    if isinstance(record.get("id"), (str, int)) and ("response" in record or "request" in record):
        rid = str(record["id"])
    try:
        request, response, metadata = _unwrap(record, batch)
        kind = _response_kind(response)
        _check_response(response, kind)
    except TranscriptError as exc:
        error = f"{source}:{line}: {exc.reason}"
        return Transcript(id=rid, source=source, line=line, raw=record, error=error)
    return Transcript(id=rid, source=source, line=line, request=request, response=response,
                      metadata=metadata, raw=record, fmt="chat" if kind == "chat" else "responses")


def open_log(path: Path) -> IO[bytes]:
    """A log file opened for binary reading, gzip-decompressed when it ends in `.gz`."""
    if path.suffix == ".gz":
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]  # GzipFile is a binary IO
    return path.open("rb")


_DIGITS_AS_NINES = bytes.maketrans(b"0123456789", b"9" * 10)
_LONG_RUN = b"9" * 20


def _has_long_number(raw: bytes) -> bool:
    """Whether `raw` holds a run of 20 digits, too wide for orjson to read as an integer.

    Every digit becomes a 9 and a run of twenty 9s is searched for: a tenth of the time of the
    regular expression `[0-9]{20}` on log lines, which is paid for every line of every batch.
    """
    return _LONG_RUN in raw.translate(_DIGITS_AS_NINES)


def load_line(raw: bytes) -> Any:
    """One JSONL line parsed: by orjson (several times faster), else by the standard library.

    What orjson refuses (invalid JSON, but also `NaN` or a lone surrogate, which `json` reads)
    goes through `json`, so the values read and the error messages are those of `json`. So does
    a line with a run of 20 digits: orjson would read an integer wider than 64 bits as a float.
    """
    if not _has_long_number(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw.rstrip(b"\r\n").decode("utf-8"))


def _read_jsonl(path: Path, name: str, batch: BatchInputs | None) -> Iterator[Transcript]:
    with open_log(path) as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                obj = load_line(raw)
            except UnicodeDecodeError as exc:
                yield _failed(name, number, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
            except json.JSONDecodeError as exc:
                yield _failed(name, number, f"invalid JSON: {exc.msg} at column {exc.colno}")
            else:
                yield normalize_record(obj, source=name, line=number, batch=batch)


def json_file_records(path: Path) -> list[Any]:
    """The records of a `.json` file (optionally gzipped): an array of them, or one.

    Raises `UnicodeDecodeError` or `json.JSONDecodeError` for a file that is not UTF-8 JSON.
    """
    with open_log(path) as handle:
        data = handle.read()
    obj = json.loads(data.decode("utf-8"))
    return obj if isinstance(obj, list) else [obj]


def _read_json(path: Path, name: str, batch: BatchInputs | None) -> Iterator[Transcript]:
    try:
        items = json_file_records(path)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", 1)
        yield _failed(name, line, f"invalid JSON: {getattr(exc, 'msg', exc)}")
        return
    for number, item in enumerate(items, start=1):
        yield normalize_record(item, source=name, line=number, batch=batch)


def _failed(source: str, line: int, message: str) -> Transcript:
    return Transcript(id=f"{source}:{line}", source=source, line=line, error=f"{source}:{line}: {message}")


def is_jsonl(path: Path) -> bool:
    """Whether a file holds one record per line (`.jsonl`, `.ndjson`, optionally gzipped)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in (".jsonl", ".ndjson")


def read_path(path: str | Path, batch: BatchInputs | None = None) -> Iterator[Transcript]:
    """Transcripts of one file: `.jsonl`/`.ndjson` line by line, `.json` as an array or one object."""
    p = Path(path)
    if not p.is_file():
        raise TranscriptError(f"{p}: no such file")
    reader = _read_jsonl if is_jsonl(p) else _read_json
    yield from reader(p, str(path), batch)


def read_transcripts(source: Source, *,
                     batch_inputs: Sequence[str | Path] | BatchInputs = ()) -> Iterator[Transcript]:
    """Every record of `source` as a `Transcript`, lazily, in order; bad records carry `error`.

    `source` is a path, a list of paths, a record dict, an SDK `Response`, or an iterable of those.
    `batch_inputs` are OpenAI Batch API input files: output lines get their request from the input
    line with the same `custom_id`.
    """
    batch = batch_inputs if isinstance(batch_inputs, BatchInputs) else (
        BatchInputs(batch_inputs) if batch_inputs else None)
    if isinstance(source, (str, Path)):
        yield from read_path(source, batch)
        return
    if isinstance(source, dict) or hasattr(source, "model_dump"):
        yield normalize_record(source, source="<records>", line=1, batch=batch)
        return
    for number, item in enumerate(source, start=1):
        if isinstance(item, (str, Path)):
            yield from read_path(item, batch)
        else:
            yield normalize_record(item, source="<records>", line=number, batch=batch)
