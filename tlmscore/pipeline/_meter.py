"""`InputMeter`: how far into its input files a run is, in bytes, for a progress bar with a total.

The total is the size of every input file (unknown when an input is a live source or records in
memory). A record's position is the size of the files before its own plus its line's byte offset;
a record without an offset (a span export, a JSON array) or in a gzip file (whose offsets count
decompressed bytes) stands at the start of its file until the file is done.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tlmscore.ingest import Location, gzipped
from tlmscore.stores import is_live


class InputMeter:
    """Bytes of the inputs (`total`, None when not all are files) and how far a record stands in them."""

    def __init__(self, inputs: Sequence[object]) -> None:
        self.total: int | None = None
        self._before: dict[str, int] = {}
        self._offsets: dict[str, bool] = {}
        if not inputs or not all(isinstance(i, (str, Path)) and not is_live(str(i)) and Path(i).is_file()
                                 for i in inputs):
            return
        total = 0
        for given in inputs:
            path = Path(str(given))
            self._before.setdefault(str(given), total)
            self._offsets[str(given)] = not gzipped(path)  # a decompressed read has no file offsets
            total += path.stat().st_size
        self.total = total

    def position(self, location: Location) -> int | None:
        """Bytes of the inputs before `location`'s line (None: no total to measure against)."""
        if self.total is None:
            return None
        start = self._before.get(location.source)
        if start is None:
            return None
        inside = location.offset if location.offset >= 0 and self._offsets.get(location.source) else 0
        return min(start + inside, self.total)
