"""Extraction: turn a fetched body into the readable text a scorer sees.

`extract` is pure (bytes in, text out) and knows nothing of the network: HTML goes through
trafilatura (main text as Markdown, favouring recall, title from the page's metadata), plain text
is decoded as is, JSON is pretty-printed, PDF text comes from pypdf. Unicode is kept.

Extraction costs about 10 ms of CPU per article page, so a batch of hundreds of pages must not run
it on the event loop. `ExtractPool` runs `extract` in worker *processes* (lxml is not safe to
drive from many threads of one process), created only when there is something to extract, from a
`forkserver` that has already imported this module, so a worker starts in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import re
import threading
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from importlib.metadata import version
from typing import Literal, NamedTuple

from tlmscore.errors import FetchError

__all__ = [
    "EXTRACTOR_VERSION",
    "WARM_UP_PAGE",
    "ExtractPool",
    "ExtractStatus",
    "Extracted",
    "content_kind",
    "extract",
    "media_type",
    "start_forkserver",
    "supported_type",
]

EXTRACTOR_VERSION = f"1;trafilatura={version('trafilatura')};pypdf={version('pypdf')}"
"""Stored with every cached body: a change re-extracts cached pages without fetching them again."""

ExtractStatus = Literal["ok", "empty", "unsupported_type"]
Kind = Literal["html", "text", "json", "pdf"]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown", "text/csv", "text/x-rst"})
_JSON_TYPES = frozenset({"application/json", "text/json"})
_PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
_SNIFF_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown"})
_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.I)
_SNIFF_BYTES = 4096
_WORKER_NICENESS = 10
_LOGGERS = ("trafilatura", "htmldate", "courlan", "justext", "pypdf", "charset_normalizer")
_WARM_UP_PARAGRAPH = (
    "<p>The council met on Tuesday and <a href='/vote'>voted</a> to extend the tram line, a plan that "
    "residents had long asked for. Work starts in <b>spring</b>.</p>"
)
WARM_UP_PAGE = (
    "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Tram line extended | City News</title>"
    "<meta property='og:title' content='Tram line extended'></head><body>"
    "<header><nav><ul><li><a href='/'>Home</a></li><li><a href='/news'>News</a></li></ul></nav></header>"
    "<main><article><h1>Tram line extended</h1><p class='byline'>By A. Writer, 3 May 2024</p>"
    + _WARM_UP_PARAGRAPH * 6
    + "<h2>Details</h2><ul><li>Four new stops</li><li>A tram every six minutes</li></ul>"
    "<blockquote>It is about time.</blockquote>"
    "<table><tr><th>Stop</th><th>Opens</th></tr><tr><td>Airport</td><td>2031</td></tr></table>"
    + _WARM_UP_PARAGRAPH * 4
    + "<pre><code>x = 1</code></pre><figure><img src='a.jpg' alt='tram'><figcaption>A tram</figcaption></figure>"
    "</article><section id='comments' class='comments'><div class='comment'><p>Great news.</p></div></section>"
    "</main><aside class='sidebar'><a href='/related'>Related story</a></aside>"
    "<footer><p>(c) City News</p><a href='/share'>Share</a></footer></body></html>"
).encode()
"""An article page with the usual furniture (navigation, lists, a table, comments, a footer).

Extracting it once takes trafilatura through the code paths a real page takes, which build their
tables on first use; after a tiny page instead, the first real page still cost 11 ms more than
the second.
"""


class Extracted(NamedTuple):
    """What `extract` found: a title when there is one, the text, and the page status it implies."""

    title: str | None
    text: str | None
    status: ExtractStatus


def media_type(content_type: str | None) -> str:
    """Return the lower-cased media type of a `Content-Type` header, without parameters."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def _charset(content_type: str | None) -> str | None:
    """Return the `charset` parameter of a `Content-Type` header, if it names a known codec."""
    for param in (content_type or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return _known_codec(value.strip().strip("\"'"))
    return None


def _known_codec(name: str) -> str | None:
    """`name` if Python can decode with it, else None."""
    try:
        "".encode(name)
    except (LookupError, ValueError):
        return None
    return name


def _declared_kind(mime: str) -> Kind | None:
    """Return the extractor a declared media type names, if any."""
    declared: tuple[tuple[frozenset[str], Kind], ...] = (
        (_HTML_TYPES, "html"),
        (_TEXT_TYPES, "text"),
        (_JSON_TYPES, "json"),
        (_PDF_TYPES, "pdf"),
    )
    for types, kind in declared:
        if mime in types:
            return kind
    return "json" if mime.endswith("+json") else None


def supported_type(content_type: str | None) -> bool:
    """Whether a body declared as `content_type` may hold text (missing and generic types may).

    The fetcher asks this before reading a body, so an image or a video is never downloaded.
    """
    mime = media_type(content_type)
    return mime in _SNIFF_TYPES or _declared_kind(mime) is not None


def content_kind(content_type: str | None, body: bytes) -> Kind | None:
    """Which extractor handles this body, or None when none does.

    The declared type decides, except that a PDF signature always wins and a missing or generic
    type (`application/octet-stream`) is decided by looking at the first bytes.
    """
    if body.startswith(b"%PDF-"):
        return "pdf"
    mime = media_type(content_type)
    if mime in _SNIFF_TYPES:
        return _sniff(body)
    return _declared_kind(mime)


def _sniff(body: bytes) -> Kind | None:
    """Guess the kind of an undeclared body from its first bytes."""
    head = body[:1024].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")) or b"<html" in head:
        return "html"
    if head.startswith((b"{", b"[")):
        return "json"
    if b"\x00" in head:
        return None
    try:
        body[:_SNIFF_BYTES].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < _SNIFF_BYTES - 4:  # not just a character cut in half at the end
            return None
    return "text"


def _decode(body: bytes, charset: str | None) -> str:
    """Decode text with its declared charset, else UTF-8, else Windows-1252 (never fails)."""
    if charset:
        return body.decode(charset, errors="replace")
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")


def _html(body: bytes, content_type: str | None, url: str) -> tuple[str | None, str | None]:
    """Title and main text (Markdown) of an HTML page."""
    meta = _META_CHARSET.search(body[:4096])
    charset = _charset(content_type) or (_known_codec(meta.group(1).decode("ascii")) if meta else None)
    document = body.decode(charset, errors="replace") if charset else body
    # Imported here: only extraction workers need trafilatura, the fetching process never does.
    import trafilatura  # noqa: PLC0415
    from trafilatura.metadata import extract_title  # noqa: PLC0415

    tree = trafilatura.load_html(document)
    if tree is None:
        return None, None
    title = extract_title(tree)
    text = trafilatura.extract(tree, url=url or None, output_format="markdown", favor_recall=True)
    return title, text


def _pdf(body: bytes) -> tuple[str | None, str | None]:
    """Title and text of a PDF; an unreadable or encrypted PDF has no text."""
    import pypdf  # noqa: PLC0415  (only extraction workers read PDFs)
    from pypdf.errors import PyPdfError  # noqa: PLC0415

    try:
        reader = pypdf.PdfReader(io.BytesIO(body))
        if reader.is_encrypted:
            reader.decrypt("")
        title = reader.metadata.title if reader.metadata else None
        text = "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except (PyPdfError, ValueError, TypeError, KeyError, OSError, RecursionError):
        return None, None
    return (str(title) if title else None), text


def _json(body: bytes, charset: str | None) -> str:
    """JSON pretty-printed with Unicode kept; a body that is not JSON is shown as text."""
    try:
        value = json.loads(body.decode(charset, errors="replace") if charset else body)
    except (ValueError, UnicodeDecodeError):
        return _decode(body, charset)
    return json.dumps(value, indent=2, ensure_ascii=False)


def extract(body: bytes, content_type: str | None, url: str) -> Extracted:
    """Extract the readable text of a fetched body.

    `content_type` is the response's `Content-Type` header (parameters allowed); `url` is where the
    body came from (trafilatura uses it to resolve links). Returns status `unsupported_type` for
    a type no extractor handles and `empty` when nothing readable is left.
    """
    kind = content_kind(content_type, body)
    if kind is None:
        return Extracted(None, None, "unsupported_type")
    title: str | None = None
    if kind == "html":
        title, text = _html(body, content_type, url)
    elif kind == "pdf":
        title, text = _pdf(body)
    elif kind == "json":
        text = _json(body, _charset(content_type))
    else:
        text = _decode(body, _charset(content_type))
    text = text.replace("\x00", "").strip() if text else None
    title = " ".join(title.split()) if title else None
    if not text:
        return Extracted(title or None, None, "empty")
    return Extracted(title or None, text, "ok")


def _cores() -> int:
    """Count the cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _init_worker() -> None:
    """Prepare a worker process: quiet, polite, and bound to the life of the process that started it.

    Library log records and warnings stay off the user's terminal. Workers run at a lower
    priority, so the fetching process, which keeps the downloads moving, never waits behind an
    extraction for a core; the workers still get every cycle it leaves idle. A worker blocks on its task
    queue, which never reports the parent's death, so a parent killed outright would leave its
    workers (and the forkserver) running for good; a watcher thread ends the worker instead.
    """
    for name in _LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    warnings.simplefilter("ignore")
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(_WORKER_NICENESS)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True).start()


def _exit_with(sentinel: int) -> None:
    """Wait until the parent process is gone (its sentinel becomes readable), then exit."""
    multiprocessing.connection.wait([sentinel])
    os._exit(0)


def _mp_context() -> multiprocessing.context.BaseContext:
    """`forkserver` where there is one, else `spawn`.

    `fork` is avoided: the parent runs an event loop, a cache thread and (with numpy loaded)
    native thread pools, and forking a threaded process can leave a child holding a lock that
    nobody will release. The forkserver imports this module once, so each worker forked from it
    starts in milliseconds; only the server's own start (a new interpreter and its imports) is
    paid, once per process.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__, "tlmscore.evidence.warmup"])
        return context
    return multiprocessing.get_context("spawn")


def start_forkserver() -> None:
    """Start the server workers are forked from, and return without waiting for it to load.

    The `tlmscore` executable calls this first thing when it is going to fetch, so the server
    imports and warms up trafilatura (a quarter of a second) on another core while the command
    starts; the pool then finds it ready. Without a forkserver (Windows, macOS spawn) it does
    nothing.
    """
    if _mp_context().get_start_method() == "forkserver":
        from multiprocessing import forkserver  # noqa: PLC0415

        forkserver.ensure_running()


class ExtractPool:
    """Runs `extract` in worker processes, overlapped with fetching.

    The pool is created on first use, or by `start` as soon as a run sends its first request, so
    the workers get ready while the first responses are on their way. Creation happens on a
    thread: starting processes waits on the forkserver, and the event loop must not wait with it.
    A run that finds everything in the cache starts no worker. A worker that crashes (a parser
    fault on a hostile page) breaks the pool: it is replaced and the page tried once more, then
    reported as `empty`.

    As with any use of worker processes, a script that runs tlmscore must keep its top-level
    work under `if __name__ == "__main__":`, since the workers import the main module.
    """

    def __init__(self, workers: int | None = None) -> None:
        self._workers = workers or _cores()
        self._pool: asyncio.Future[ProcessPoolExecutor] | None = None

    @property
    def workers(self) -> int:
        """How many extractions run at once."""
        return self._workers

    @property
    def started(self) -> bool:
        """Whether worker processes exist (or are being started)."""
        return self._pool is not None

    def start(self) -> None:
        """Start the workers in the background, unless they are running; returns at once."""
        if self._pool is None:
            self._pool = asyncio.get_running_loop().run_in_executor(None, self._create)

    def _create(self) -> ProcessPoolExecutor:
        """Create the pool and give each worker a tiny page, so all of them start now, not at the first page.

        Under `spawn` (no forkserver) this also pays each worker's first-call costs before real work.
        """
        executor = ProcessPoolExecutor(self._workers, mp_context=_mp_context(), initializer=_init_worker)
        for _ in range(self._workers):
            executor.submit(extract, WARM_UP_PAGE, "text/html", "")
        return executor

    async def extract(self, body: bytes, content_type: str | None, url: str) -> Extracted:
        """Run `extract(body, content_type, url)` in a worker process."""
        loop = asyncio.get_running_loop()
        for _ in range(2):
            self.start()
            pool = self._pool
            assert pool is not None  # noqa: S101 -- set by start()
            try:
                executor = await pool
                return await loop.run_in_executor(executor, extract, body, content_type, url)
            except (BrokenProcessPool, OSError, EOFError):
                self._discard(pool)
        raise FetchError("empty", "the text extractor crashed on this page")

    def _discard(self, pool: asyncio.Future[ProcessPoolExecutor]) -> None:
        """Drop a broken pool, once however many pages saw it break; the next page starts another."""
        if self._pool is not pool:
            return
        self._pool = None
        if not pool.cancelled() and pool.exception() is None:
            pool.result().shutdown(wait=False, cancel_futures=True)

    async def aclose(self) -> None:
        """Stop the workers (pages still queued are cancelled)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            executor = await pool
        except (OSError, EOFError):  # the pool never started; nothing to stop
            return
        await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(executor.shutdown, wait=True, cancel_futures=True)
        )
