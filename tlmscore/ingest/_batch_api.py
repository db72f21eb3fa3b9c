"""OpenAI Batch API input files: the request bodies of a Batch run, found by `custom_id`.

A Batch output line holds the response only; the request it answers is the input line with the
same `custom_id`. `BatchInputs` keeps where each input line is and reads it on demand; it pickles
as its files and that index (the Ray engine's tasks read the same files at the same paths).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tlmscore.errors import TranscriptError
from tlmscore.ingest._logfile import RandomAccess, lines, load_line

_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*("(?:[^"\\]|\\.)*")')


class BatchInputs:
    """The request bodies of OpenAI Batch API input files, found by `custom_id` and read on demand.

    Input lines are `{"custom_id", "method", "url", "body"}`; only each line's place is kept in
    memory (custom_id → file and byte offset), so input files of any size can be joined. Lookups
    go through `RandomAccess`, so a gzipped input file is decompressed once, not once per lookup.
    """

    def __init__(self, paths: Sequence[str | Path] = ()) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self._where: dict[str, tuple[int, int]] = {}
        self._files = RandomAccess()
        for index, path in enumerate(self.paths):
            if not path.is_file():
                raise TranscriptError(f"{path}: no such batch input file")
            self._scan(index, path)

    def __len__(self) -> int:
        return len(self._where)

    def __getstate__(self) -> dict[str, Any]:
        # sent to other processes (the Ray engine's tasks) as the files and the index, not the open files
        return {"paths": self.paths, "where": self._where}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.paths = state["paths"]
        self._where = state["where"]
        self._files = RandomAccess()

    def close(self) -> None:
        """Close the input files (and remove decompressed copies); later lookups open them again."""
        self._files.close()

    def _scan(self, index: int, path: Path) -> None:
        for _, offset, raw in lines(path):
            custom_id = self._custom_id(raw)
            if custom_id is not None:
                self._where.setdefault(custom_id, (index, offset))

    @staticmethod
    def _custom_id(raw: bytes) -> str | None:
        match = _CUSTOM_ID.search(raw)
        try:
            if match is not None:
                return str(json.loads(match.group(1)))
            obj = load_line(raw) if raw.strip() else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return str(obj["custom_id"]) if isinstance(obj, dict) and "custom_id" in obj else None

    def request(self, custom_id: str) -> dict[str, Any] | None:
        """The request body sent under `custom_id`, or None when no input line has it."""
        where = self._where.get(custom_id)
        if where is None:
            return None
        index, offset = where
        try:
            line = load_line(self._files.line(self.paths[index], offset))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        body = line.get("body") if isinstance(line, dict) else None
        return body if isinstance(body, dict) else None
