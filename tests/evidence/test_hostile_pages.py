"""Hostile pages: compression bombs, charsets that are not text encodings, deep JSON, PDF bombs and
slow pages each cost only their own page, never memory, the event loop or the batch."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import httpx
import pytest
import zstandard

from tests.servers.evidence_server import EvidenceServer, Reply, html_page
from tests.servers.hostile_pages import (
    deep_json,
    gzip_bomb,
    gzip_twice,
    hostile_replies,
    mutated_pdf,
    slow_page,
    zstd_bomb,
)
from tests.support.processes import cpu_ticks, descendants
from tlmscore.evidence import extract as extract_module
from tlmscore.evidence._body import ENCODINGS, BodyDecoder, TooLargeError
from tlmscore.evidence._workers import ExtractPool, Limits
from tlmscore.evidence.extract import extract_safely
from tlmscore.evidence.fetch import Fetcher
from tlmscore.evidence.page import Page
from tlmscore.settings import Settings

CAP = 5_000_000
PEAK_RSS_LIMIT_MB = 500
HEALTHY = html_page("Harbour", "The harbour ferry leaves every twenty minutes from the north pier.")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(cache_dir=tmp_path / "cache", allow_hosts={"127.0.0.1"}, timeout=30, retries=0)


def decode(encoding: str, body: bytes, cap: int = CAP, piece: int = 4096) -> bytes:
    decoder = BodyDecoder(encoding, cap)
    return b"".join(decoder.feed(body[i:i + piece]) for i in range(0, len(body), piece))


# ------------------------------------------------------------------------------------------- decoding


def test_every_encoding_httpx_asks_for_is_decoded() -> None:
    with httpx.Client() as client:
        asked = {e.strip() for e in client.headers["accept-encoding"].split(",")}
    assert asked <= set(ENCODINGS)


@pytest.mark.parametrize(("encoding", "packed"), [
    ("gzip", gzip.compress(HEALTHY)),
    ("gzip", gzip.compress(HEALTHY[:100]) + gzip.compress(HEALTHY[100:])),  # two members
    ("deflate", zlib.compress(HEALTHY)),
    ("deflate", zlib.compress(HEALTHY)[2:-4]),  # raw deflate, which httpx also accepts
    ("zstd", zstandard.compress(HEALTHY)),
    ("gzip, zstd", zstandard.compress(gzip.compress(HEALTHY))),
    ("GZIP, Identity", gzip.compress(HEALTHY)),
    ("x-unknown", HEALTHY),  # passed through, as httpx does
])
def test_bodies_decode_to_what_was_sent(encoding: str, packed: bytes) -> None:
    assert decode(encoding, packed) == HEALTHY


def test_brotli_decodes_when_installed() -> None:
    brotli = pytest.importorskip("brotli")
    assert decode("br", brotli.compress(HEALTHY)) == HEALTHY


@pytest.mark.parametrize(("encoding", "make"), [
    ("gzip", gzip_bomb), ("zstd", zstd_bomb), ("gzip, gzip", gzip_twice),
])
def test_bombs_stop_at_the_cap(encoding: str, make: object) -> None:
    body = make()  # type: ignore[operator]
    with pytest.raises(TooLargeError):
        decode(encoding, body, piece=65536)


def test_a_body_at_the_cap_is_kept_and_one_byte_more_is_not() -> None:
    body = b"x" * 1000
    assert decode("gzip", gzip.compress(body), cap=1000) == body
    with pytest.raises(TooLargeError):
        decode("gzip", gzip.compress(body + b"x"), cap=1000)


def test_corrupt_compressed_data_is_a_decoding_error() -> None:
    with pytest.raises(httpx.DecodingError):
        decode("gzip", b"\x1f\x8b\x08\x00" + b"\xff" * 64)


def test_bombs_beside_a_healthy_page_are_too_large_and_the_page_is_ok(server: EvidenceServer,
                                                                     settings: Settings) -> None:
    urls = {name: server.route(f"/{name}", reply) for name, (reply, _) in hostile_replies().items()
            if name in ("gzip", "deflate", "zstd", "br", "gzip-gzip")}
    healthy = server.route("/healthy", Reply(body=HEALTHY))

    async def run() -> dict[str, Page]:
        async with Fetcher(settings) as fetcher:
            return await fetcher.pages([*urls.values(), healthy])

    pages = asyncio.run(run())
    for url in urls.values():
        assert pages[url].status == "too_large", pages[url]
        assert "over the limit" in (pages[url].error or "")
    assert pages[healthy].status == "ok"


# ----------------------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(("content_type", "body"), [
    ("text/html; charset=idna", b"<html><body><p>Charset idna in the header.</p></body></html>"),
    ("text/html; charset=punycode", b"<html><body><p>Charset punycode \xff in the header.</p></body></html>"),
    ("text/html", b"<html><head><meta charset='idna'></head><body><p>Charset in a meta tag.</p></body></html>"),
    ("text/plain; charset=idna", b"plain text \xff with a charset that cannot decode it"),
    ("application/json; charset=punycode", b'{"a": "\xff"}'),
])
def test_charsets_that_are_not_text_encodings_are_ignored(content_type: str, body: bytes) -> None:
    found = extract_safely(body, content_type, "")
    assert found.status == "ok" and found.text


def test_json_nested_too_deep_is_shown_as_text() -> None:
    found = extract_safely(deep_json(), "application/json", "")
    assert found.status == "ok" and (found.text or "").startswith("[[[")


@pytest.mark.parametrize("error", [AssertionError("xref"), AttributeError("'NoneType' has no 'get'"),
                                   MemoryError(), RecursionError("too deep")])
def test_anything_an_extractor_raises_is_that_pages_status(monkeypatch: pytest.MonkeyPatch,
                                                           error: Exception) -> None:
    def fails(_body: bytes) -> tuple[str | None, str | None]:
        raise error

    monkeypatch.setattr(extract_module, "_pdf", fails)
    found = extract_safely(b"%PDF-1.4 mutated", "application/pdf", "")
    assert found.status == "extract_failed" and found.text is None
    assert type(error).__name__ in (found.error or "")


def test_a_mutated_pdf_that_makes_pypdf_raise_is_extract_failed() -> None:
    """One byte changed (found by mutating PDFs at random): pypdf raises AttributeError."""
    mutated = mutated_pdf()
    with pytest.raises(AttributeError):
        extract_module.extract(mutated, "application/pdf", "")
    found = extract_safely(mutated, "application/pdf", "")
    assert found.status == "extract_failed" and "AttributeError" in (found.error or "")


async def _until_busy(pids: list[int], limit: float = 60.0) -> None:
    """Return once the processes have used CPU (5 ticks): a worker is working on the page it was given."""
    start, deadline = cpu_ticks(pids), time.monotonic() + limit
    while cpu_ticks(pids) < start + 5:
        assert time.monotonic() < deadline, f"no worker took the page within {limit:.0f} s"
        await asyncio.sleep(0.01)


def _helper(pid: int) -> bool:
    """Whether a child process is multiprocessing's resource tracker rather than a worker."""
    return b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()


def test_a_page_over_its_cpu_limit_fails_alone() -> None:
    async def run() -> list[tuple[str, str | None]]:
        pool = ExtractPool(2, Limits(cpu_seconds=0.3))
        try:
            found = await asyncio.gather(pool.extract(slow_page(), "text/html", ""),
                                         pool.extract(HEALTHY, "text/html", ""),
                                         pool.extract(b"plain", "text/plain", ""))
            again = await pool.extract(HEALTHY, "text/html", "")  # the worker that timed out still serves
        finally:
            await pool.aclose()
        return [(f.status, f.error) for f in [*found, again]]

    (slow, slow_error), *rest = asyncio.run(run())
    assert slow == "extract_failed" and "0.3 s of CPU" in (slow_error or "")
    assert [status for status, _ in rest] == ["ok", "ok", "ok"]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the worker processes in /proc")
def test_a_worker_that_dies_on_a_page_is_replaced_and_only_that_page_fails() -> None:
    async def run() -> list[str]:
        before = set(descendants(os.getpid()))
        pool = ExtractPool(1, Limits(cpu_seconds=60))
        try:
            await pool.extract(b"warm", "text/plain", "")
            workers = [pid for pid in descendants(os.getpid()) if pid not in before and not _helper(pid)]
            assert workers
            slow = asyncio.ensure_future(pool.extract(slow_page(), "text/html", ""))
            await _until_busy(workers)  # killed while it works on the page, not before it has it
            for pid in workers:
                os.kill(pid, signal.SIGKILL)
            first = await slow
            second = await pool.extract(HEALTHY, "text/html", "")
        finally:
            await pool.aclose()
        return [first.status, first.error or "", second.status]

    status, error, after = asyncio.run(run())
    assert status == "extract_failed" and "ended" in error
    assert after == "ok"


def test_a_worker_out_of_memory_fails_its_page_only() -> None:
    async def run() -> list[str]:
        pool = ExtractPool(1, Limits(memory_bytes=32 * 2**20))
        try:
            big = await pool.extract(slow_page(200_000), "text/html", "")  # lxml needs far more than 32 MB
            small = await pool.extract(b"plain", "text/plain", "")
        finally:
            await pool.aclose()
        return [big.status, small.status]

    assert asyncio.run(run()) == ["extract_failed", "ok"]


# ------------------------------------------------------------------------------------- the whole batch

PEAK_RSS = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=600)
sys.stderr.write(done.stderr)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _record(n: int, url: str) -> dict[str, object]:
    return {"id": f"r{n}", "request": {"input": "What does the page say?"}, "response": {
        "id": f"resp_{n}", "object": "response", "model": "gpt-4.1", "created_at": 1_750_000_000, "output": [
            {"type": "web_search_call", "id": f"ws_{n}", "status": "completed",
             "action": {"type": "search", "query": "page", "sources": [{"type": "url", "url": url}]}},
            {"type": "message", "id": f"m{n}", "role": "assistant", "status": "completed", "content": [
                {"type": "output_text", "text": "It says so.", "annotations": [
                    {"type": "url_citation", "url": url, "title": "Page", "start_index": 0, "end_index": 2}]}]}]}}


def test_a_batch_of_hostile_pages_beside_healthy_ones_gives_every_row_in_bounded_memory(tmp_path: Path) -> None:
    """The batch runs in the real executable; its peak RSS (largest process: the CLI, a worker or
    the resource tracker, read from `RUSAGE_CHILDREN` of a wrapper) stays under the limit."""
    expected: dict[str, str] = {}
    with EvidenceServer() as server:
        for name, (reply, status) in hostile_replies().items():
            expected[server.route(f"/{name}", reply)] = status
        for n in range(4):
            text = f"Healthy page {n}: the harbour ferry leaves every twenty minutes."
            expected[server.route(f"/healthy{n}", Reply(body=html_page(f"Healthy {n}", text)))] = "ok"
        records = [_record(n, url) for n, url in enumerate(expected)]
        log = tmp_path / "log.jsonl"
        log.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        out = tmp_path / "out.jsonl"
        command = [sys.executable, "-m", "tlmscore", "prepare", str(log), "-o", str(out), "--quiet",
                   "--cache-dir", str(tmp_path / "cache"), "--allow-host", "127.0.0.1", "--extract-timeout", "0.5"]
        done = subprocess.run([sys.executable, "-c", PEAK_RSS, *command], capture_output=True, text=True,
                              timeout=900, check=True)
    code, peak_kb = (int(v) for v in done.stdout.split())
    assert code == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["id"] for row in rows] == [r["id"] for r in records]
    for row, (url, status) in zip(rows, expected.items(), strict=True):
        assert row["error"] is None, row["error"]
        if status == "ok":
            assert row["n_urls_ok"] == 1, (url, row["prompt"][-600:])
        else:
            assert row["n_urls_ok"] == 0 and f"could not be retrieved ({status}:" in row["prompt"], url
    assert peak_kb / 1024 < PEAK_RSS_LIMIT_MB, f"peak RSS {peak_kb / 1024:.0f} MB"
