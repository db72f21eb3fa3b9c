"""Hostile response bodies for the evidence tests: compression bombs, bad charsets, deep JSON, a PDF bomb.

Every bomb decodes to `BOMB_SIZE` bytes of zeros, far beyond any page limit, yet is a few
kilobytes to a megabyte on the wire. They are built without ever holding the decoded bytes: a
deflate stream of zeros repeats the same bytes after every full flush, so one flushed megabyte is
compressed once and repeated.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import zstandard

from tests.servers.evidence_server import Reply

BOMB_SIZE = 2**30
_MB = 2**20
_ZEROS = b"\0" * _MB


def _raw_deflate(size: int, fill: bytes = _ZEROS) -> bytes:
    """Raw deflate data of `size` bytes repeating the megabyte `fill` (`size` in whole megabytes)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = packer.compress(fill) + packer.flush(zlib.Z_FULL_FLUSH)
    return block * (size // _MB) + packer.flush()


def _checksum(update: Callable[[bytes, int], int], start: int, size: int, fill: bytes = _ZEROS) -> int:
    value = start
    for _ in range(size // _MB):
        value = update(fill, value)
    return value


def _zlib_stream(size: int, fill: bytes = _ZEROS) -> bytes:
    """A zlib-wrapped deflate stream of `size` bytes repeating `fill`."""
    return b"\x78\xda" + _raw_deflate(size, fill) + struct.pack(">I", _checksum(zlib.adler32, 1, size, fill))


def gzip_bomb(size: int = BOMB_SIZE) -> bytes:
    """A valid single-member gzip body of `size` zeros."""
    crc = _checksum(zlib.crc32, 0, size)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + _raw_deflate(size) + struct.pack("<II", crc, size & 0xFFFFFFFF)


def deflate_bomb(size: int = BOMB_SIZE) -> bytes:
    """A valid zlib-wrapped deflate body of `size` zeros."""
    return _zlib_stream(size)


def zstd_bomb(size: int = BOMB_SIZE) -> bytes:
    """A zstd body of `size` zeros."""
    packer = zstandard.ZstdCompressor(level=3).compressobj()
    return b"".join(packer.compress(_ZEROS) for _ in range(size // _MB)) + packer.flush()


def brotli_bomb(size: int = BOMB_SIZE) -> bytes:
    """A brotli body of `size` zeros (brotli is an optional dependency of httpx)."""
    import brotli  # type: ignore[import-untyped]

    packer = brotli.Compressor(quality=1)
    return b"".join(packer.process(_ZEROS) for _ in range(size // _MB)) + packer.finish()


def gzip_twice() -> bytes:
    """A gzip bomb gzipped again (`Content-Encoding: gzip, gzip`): under 2 KB on the wire."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    return packer.compress(gzip_bomb()) + packer.flush()


def pdf_bomb() -> bytes:
    """A PDF whose one page has a content stream that inflates to a gigabyte of spaces."""
    stream = _zlib_stream(BOMB_SIZE, b" " * _MB)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


def deep_json(depth: int = 100_000) -> bytes:
    """JSON arrays nested `depth` deep."""
    return b"[" * depth + b"]" * depth


def mutated_pdf() -> bytes:
    """A PDF with one byte changed (found by mutating PDFs at random) on which pypdf raises AttributeError."""
    from tests.evidence.test_extract import make_pdf

    pdf = make_pdf(["The council met on Tuesday.", "It voted to extend the tram line."], title="Tram")
    return pdf.replace(b"trailer\n", b"trailer.")


def slow_page(paragraphs: int = 60_000) -> bytes:
    """A large, valid HTML page that takes trafilatura well over a second of CPU."""
    body = "".join(f"<p>Paragraph {n} has some words in it to be kept by the extractor.</p>" for n in range(paragraphs))
    return f"<html><body>{body}</body></html>".encode()


def hostile_replies() -> dict[str, tuple[Reply, str]]:
    """Name -> (reply, the page status it must end in) for every hostile page."""
    html = "text/html; charset=utf-8"
    return {
        "gzip": (Reply(body=gzip_bomb(), content_type=html, headers={"Content-Encoding": "gzip"}), "too_large"),
        "deflate": (Reply(body=deflate_bomb(), content_type=html, headers={"Content-Encoding": "deflate"}),
                    "too_large"),
        "zstd": (Reply(body=zstd_bomb(), content_type=html, headers={"Content-Encoding": "zstd"}), "too_large"),
        "br": (Reply(body=brotli_bomb(), content_type=html, headers={"Content-Encoding": "br"}), "too_large"),
        "gzip-gzip": (Reply(body=gzip_twice(), content_type=html, headers={"Content-Encoding": "gzip, gzip"}),
                      "too_large"),
        "idna-header": (Reply(body=b"<html><body><p>Read with charset idna in the header.</p></body></html>",
                              content_type="text/html; charset=idna"), "ok"),
        "punycode-meta": (Reply(body=b"<html><head><meta charset='punycode'></head><body>"
                                     b"<p>Read with charset punycode in a meta tag \xff.</p></body></html>",
                                content_type="text/html"), "ok"),
        "deep-json": (Reply(body=deep_json(), content_type="application/json"), "ok"),
        "pdf-bomb": (Reply(body=pdf_bomb(), content_type="application/pdf"), "empty"),
        "pdf-mutated": (Reply(body=mutated_pdf(), content_type="application/pdf"), "extract_failed"),
        "slow": (Reply(body=slow_page(), content_type=html), "extract_failed"),
    }
