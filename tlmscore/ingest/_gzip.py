"""Gzip-compressed logs read so that a break loses nothing decoded before it.

`gzip.GzipFile` decompresses its input in large blocks, so a file that is corrupt or cut short
part-way can fail before it hands out lines that were perfectly decodable: a log cut after its
third line may read as unreadable from its first. `GzipLog` decompresses block by block too, but
when a block fails it goes back over that block a byte at a time, hands out everything decoded
before the fault, and raises the error only on the read after that.

What it accepts is what `GzipFile` accepts: one or more gzip members, zero bytes as padding
between or after them; anything else after a member is "not a gzipped file".
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

_MAGIC = b"\x1f\x8b"
_BLOCK = 64 * 1024
_GZIP_WINDOW = 16 + zlib.MAX_WBITS  # a gzip header and trailer around a deflate stream


class GzipLog(io.RawIOBase):
    """The decompressed bytes of a gzip file, as a raw binary stream (wrap it in `io.BufferedReader`)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file: IO[bytes] = path.open("rb")
        self._decoder: Any = None  # the member being read (a zlib decompressor); None between members
        self._pending = b""  # compressed bytes read but not yet given to a decoder
        self._out = b""  # decompressed bytes not yet handed out
        self._error: BaseException | None = None  # raised once `_out` is handed out
        self._ended = False  # the end of the file, or a fault already raised: nothing more to read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        while not self._out:
            if self._error is not None:
                error, self._error = self._error, None
                self._ended = True
                raise error
            if self._ended or not self._fill():
                self._ended = True
                return 0
        target = memoryview(buffer).cast("B")
        size = min(len(target), len(self._out))
        target[:size] = self._out[:size]
        self._out = self._out[size:]
        return size

    def close(self) -> None:
        self._file.close()
        super().close()

    def _fill(self) -> bool:
        """Decode more into `_out` (or note the fault); False at the clean end of the file."""
        if not self._pending:
            self._pending = self._file.read(_BLOCK)
        if self._decoder is None:
            return self._next_member()
        if not self._pending:
            self._error = EOFError("Compressed file ended before the end-of-stream marker was reached")
            return True
        block, self._pending = self._pending, b""
        saved = self._decoder.copy()
        try:
            self._out = self._decoder.decompress(block)
        except zlib.error:
            self._out, self._error = _bytewise(saved, block)
            return True
        if self._decoder.eof:  # what follows a member's end waits for the next member
            self._pending = self._decoder.unused_data + self._pending
            self._decoder = None
        return True

    def _next_member(self) -> bool:
        """Start the member `_pending` begins with; False at the end of the file."""
        self._pending = self._pending.lstrip(b"\x00")
        while len(self._pending) < len(_MAGIC):
            more = self._file.read(_BLOCK)
            if not more:
                break
            self._pending = (self._pending + more).lstrip(b"\x00")
        if not self._pending:
            return False
        if not self._pending.startswith(_MAGIC):
            self._error = gzip.BadGzipFile(f"Not a gzipped file ({self._pending[:2]!r})")
            return True
        self._decoder = zlib.decompressobj(_GZIP_WINDOW)
        return True


def _bytewise(decoder: Any, block: bytes) -> tuple[bytes, BaseException]:
    """What `block` decodes to, fed a byte at a time, up to the byte at fault; and that fault."""
    out = bytearray()
    for at in range(len(block)):
        try:
            out += decoder.decompress(block[at : at + 1])
        except zlib.error as exc:
            return bytes(out), exc
    return bytes(out), zlib.error("invalid compressed data")


def open_gzip(path: Path) -> IO[bytes]:
    """`path` decompressed, buffered for lines; see `GzipLog`."""
    return io.BufferedReader(GzipLog(path))
