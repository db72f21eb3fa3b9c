"""Reading a response body: raw bytes off the wire, decoded here under a cap on what they become.

httpx decodes `Content-Encoding` itself, but one read of a few kilobytes can inflate to gigabytes
(a 32 KB zstd body, or a small body gzipped twice), all in memory at once and on the event loop.
So the fetcher reads the raw bytes (`Response.aiter_raw`) and `read_body` decodes them one read at
a time, every layer of a stacked encoding (`gzip, gzip`) with its own limit on the bytes it may
produce: a body that would grow past `cap` is dropped as soon as it does, and memory stays near
`cap` whatever the ratio. Every encoding httpx asks for is handled: gzip (also several members),
deflate (zlib-wrapped or raw, as httpx accepts), br (when brotli is installed) and zstd; an
encoding httpx does not know is passed through as it would be by httpx.

A body that cannot be decoded raises `httpx.DecodingError`, as httpx's own decoders would.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import zstandard


class TooLargeError(Exception):
    """Raised when a layer of decoding would produce more than its cap."""


class _Budget:
    """Counts the bytes one layer has produced and stops it past the cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.used = 0

    def spend(self, out: bytes) -> bytes:
        self.used += len(out)
        if self.used > self.cap:
            raise TooLargeError
        return out


class _Zlib:
    """gzip or deflate through zlib, asking zlib for at most the bytes still allowed."""

    def __init__(self, cap: int, wbits: int, *, raw_fallback: bool = False) -> None:
        self._budget = _Budget(cap)
        self._wbits = wbits
        self._obj = zlib.decompressobj(wbits)
        self._raw_fallback = raw_fallback  # deflate: a zlib header, or else raw deflate (as httpx)
        self._started = False

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        while data:
            try:
                piece = self._obj.decompress(data, self._budget.cap - self._budget.used + 1)
            except zlib.error:
                if not self._raw_fallback or self._started:
                    raise
                self._raw_fallback = False
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
                continue
            self._started = True
            out.append(self._budget.spend(piece))
            # Another gzip member may follow the first (concatenated gzip is a valid body).
            data = self._obj.unused_data if self._obj.eof and self._wbits > zlib.MAX_WBITS else b""
            if data:
                self._obj = zlib.decompressobj(self._wbits)
        return b"".join(out)


class _Capped:
    """A writer that keeps what a decompressor writes to it, up to a cap."""

    def __init__(self, budget: _Budget) -> None:
        self._budget = budget
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(self._budget.spend(bytes(data)))
        return len(data)


class _Zstd:
    """zstd through a stream writer, which hands over its output in pieces as it decompresses.

    `ZstdDecompressionObj.decompress` has no output limit; the writer form raises out of the
    decompression as soon as the cap is passed, so no more than one piece past it is ever held.
    """

    def __init__(self, cap: int) -> None:
        self._sink = _Capped(_Budget(cap))
        self._writer = zstandard.ZstdDecompressor().stream_writer(
            self._sink, write_size=1 << 16)  # type: ignore[arg-type]  # any object with write() will do

    def feed(self, data: bytes) -> bytes:
        try:
            self._writer.write(data)
        except zstandard.ZstdError as exc:
            raise zlib.error(str(exc)) from exc
        out, self._sink.parts = b"".join(self._sink.parts), []
        return out


class _Brotli:
    """br through brotli: with brotli 1.2's output limit, else in small slices of input."""

    _SLICE = 256

    def __init__(self, cap: int, decompressor: Callable[[], Any]) -> None:
        self._budget = _Budget(cap)
        self._obj = decompressor()
        self._limited = hasattr(self._obj, "can_accept_more_data")

    def feed(self, data: bytes) -> bytes:
        try:
            return self._limited_feed(data) if self._limited else self._sliced_feed(data)
        except TooLargeError:
            raise
        except Exception as exc:  # brotli raises its own `brotli.error`
            raise zlib.error(str(exc)) from exc

    def _limited_feed(self, data: bytes) -> bytes:
        out = [self._budget.spend(self._obj.process(data, output_buffer_limit=self._room()))]
        while not self._obj.can_accept_more_data():
            out.append(self._budget.spend(self._obj.process(b"", output_buffer_limit=self._room())))
        return b"".join(out)

    def _sliced_feed(self, data: bytes) -> bytes:
        return b"".join(self._budget.spend(self._obj.process(data[start:start + self._SLICE]))
                        for start in range(0, len(data), self._SLICE))

    def _room(self) -> int:
        return self._budget.cap - self._budget.used + 1


def _brotli() -> Callable[[], Any] | None:
    try:
        import brotli  # type: ignore[import-untyped]  # noqa: PLC0415  (optional, as for httpx)
    except ImportError:
        return None
    decompressor: Callable[[], Any] = brotli.Decompressor
    return decompressor


def _layer(encoding: str, cap: int) -> _Zlib | _Zstd | _Brotli | None:
    """The decoder for one content coding (its `feed` raises `TooLargeError` past `cap`), or None to pass it through."""
    if encoding in ("gzip", "x-gzip"):
        return _Zlib(cap, zlib.MAX_WBITS | 16)
    if encoding == "deflate":
        return _Zlib(cap, zlib.MAX_WBITS, raw_fallback=True)
    if encoding == "zstd":
        return _Zstd(cap)
    brotli = _brotli()
    if encoding == "br" and brotli is not None:
        return _Brotli(cap, brotli)
    return None


ENCODINGS = ("gzip", "deflate", "zstd", *(("br",) if _brotli() is not None else ()))
"""The content codings `read_body` decodes (httpx asks servers for the same ones)."""


class BodyDecoder:
    """Decodes a body piece by piece through the layers its `Content-Encoding` names.

    Codings are listed in the order they were applied, so they are undone last to first. Each
    layer may produce at most `cap` bytes in all; `feed` raises `TooLargeError` past that.
    """

    def __init__(self, content_encoding: str | None, cap: int) -> None:
        names = [e.strip().lower() for e in (content_encoding or "").split(",") if e.strip()]
        layers = [_layer(name, cap) for name in reversed(names) if name != "identity"]
        self._layers = [layer for layer in layers if layer is not None]
        self._budget = _Budget(cap)

    def feed(self, data: bytes) -> bytes:
        """Decode the next raw piece; returns the bytes it adds to the body."""
        try:
            for layer in self._layers:
                if not data:
                    break
                data = layer.feed(data)
        except zlib.error as exc:
            raise httpx.DecodingError(str(exc) or "corrupt compressed data") from exc
        return self._budget.spend(data)


async def read_body(response: httpx.Response, cap: int) -> bytes | None:
    """Read and decode the body of a streamed `response`; None as soon as it passes `cap` bytes.

    The raw bytes are capped as well as the decoded ones, so a huge compressed body is not
    downloaded in full either.
    """
    decoder = BodyDecoder(response.headers.get("content-encoding"), cap)
    raw_size = 0
    chunks: list[bytes] = []
    raw: AsyncIterator[bytes] = response.aiter_raw()
    try:
        async for piece in raw:
            raw_size += len(piece)
            if raw_size > cap:
                return None
            chunks.append(decoder.feed(piece))
    except TooLargeError:
        return None
    return b"".join(chunks)
