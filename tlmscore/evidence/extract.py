"""Extraction: turn a fetched body into the readable text a scorer sees.

`extract` is pure (bytes in, text out) and knows nothing of the network: HTML goes through the
chosen extractor (`Extractor`: trafilatura's main text as Markdown, favouring recall by default,
or its balanced or precision mode, or resiliparse's main-content text; the title from the page's
metadata), plain text is decoded as is, JSON is pretty-printed, PDF text comes from pypdf. Unicode
is kept. `docs/fetching.md` gives each extractor's cost and what the scorer keeps of a page with
it (`benchmarks/extractors.py`).

Extraction costs CPU on every page, so a batch of hundreds of pages must not run it on the event
loop: `_workers.ExtractPool` runs `extract_safely` in worker processes, each page
under a CPU and a memory limit. `extract_safely` turns anything an extractor raises on a hostile
body into status `extract_failed`, so one page's failure stays that page's.
"""

from __future__ import annotations

import io
import json
import re
from importlib.metadata import PackageNotFoundError, version
from typing import Literal, NamedTuple

__all__ = [
    "EXTRACTORS",
    "EXTRACTOR_VERSION",
    "WARM_UP_PAGE",
    "ExtractStatus",
    "Extracted",
    "Extractor",
    "content_kind",
    "extract",
    "extract_safely",
    "extractor_version",
    "media_type",
    "supported_type",
]

Extractor = Literal["recall", "balanced", "precision", "resiliparse"]
"""How an HTML page's main text is found: the names of `tlmscore.settings.ExtractorName`, spelled again here
because extraction workers import this module and never the settings (nor pydantic); a test holds them equal."""
EXTRACTORS: tuple[Extractor, ...] = ("recall", "balanced", "precision", "resiliparse")


def extractor_version(extractor: Extractor = "recall") -> str:
    """What made a cached page's text: the extractor and its library's version, stored with every cached body.

    A change (another extractor, a new release) re-extracts cached pages from their bodies without fetching
    them again. The default's string is the one every earlier release stored, so its caches stay valid.
    """
    base = f"1;trafilatura={version('trafilatura')};pypdf={version('pypdf')}"
    if extractor == "recall":
        return base
    if extractor == "resiliparse":
        try:
            return f"{base};resiliparse={version('resiliparse')}"
        except PackageNotFoundError:
            return f"{base};resiliparse=missing"
    return f"{base};mode={extractor}"


EXTRACTOR_VERSION = extractor_version()
"""The default extractor's `extractor_version`."""

ExtractStatus = Literal["ok", "empty", "unsupported_type", "extract_failed"]
Kind = Literal["html", "text", "json", "pdf"]

_DECLARED: dict[str, Kind] = {
    "text/html": "html", "application/xhtml+xml": "html",
    "text/plain": "text", "text/markdown": "text", "text/x-markdown": "text", "text/csv": "text", "text/x-rst": "text",
    "application/json": "json", "text/json": "json",
    "application/pdf": "pdf", "application/x-pdf": "pdf",
}
_SNIFF_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown"})
_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.I)
_SNIFF_BYTES = 4096
_CODEC_PROBE = b"a\xff\x80\xc3 <p>"
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
tables on first use; after a tiny page instead, the first real page would still pay for some of
them.
"""


class Extracted(NamedTuple):
    """What `extract` found: a title when there is one, the text, and the page status it implies.

    `error` says why, when the status is `extract_failed`.
    """

    title: str | None
    text: str | None
    status: ExtractStatus
    error: str | None = None


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
    """`name` if Python can decode any bytes with it (replacing what is invalid), else None.

    A page names its charset, so it may name a codec that is not a text encoding for arbitrary
    bytes (`idna` and `punycode` raise instead of replacing): those are ignored like unknown names.
    """
    try:
        _CODEC_PROBE.decode(name, errors="replace")
    except (LookupError, ValueError, TypeError):
        return None
    return name


def _declared_kind(mime: str) -> Kind | None:
    """Return the extractor a declared media type names, if any."""
    return _DECLARED.get(mime, "json" if mime.endswith("+json") else None)


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


def _html(body: bytes, content_type: str | None, url: str, extractor: Extractor) -> tuple[str | None, str | None]:
    """Title and main text of an HTML page (Markdown from trafilatura, plain text from resiliparse)."""
    meta = _META_CHARSET.search(body[:4096])
    charset = _charset(content_type) or (_known_codec(meta.group(1).decode("ascii")) if meta else None)
    if extractor == "resiliparse":
        return _resiliparse(body, charset)
    document = body.decode(charset, errors="replace") if charset else body
    # Imported here: only extraction workers need trafilatura, the fetching process never does.
    import trafilatura  # noqa: PLC0415
    from trafilatura.metadata import extract_title  # noqa: PLC0415

    tree = trafilatura.load_html(document)
    if tree is None:
        return None, None
    title = extract_title(tree)
    text = trafilatura.extract(tree, url=url or None, output_format="markdown",
                               favor_recall=extractor == "recall", favor_precision=extractor == "precision")
    return title, text


def _resiliparse(body: bytes, charset: str | None) -> tuple[str | None, str | None]:
    """Title and main-content text of a page by resiliparse, lists as bullets (the `resiliparse` extra).

    The page is decoded as for plain text (its declared charset, else UTF-8, else Windows-1252), and the
    title is the document's `<title>`.
    """
    try:
        from resiliparse.extract.html2text import extract_plain_text  # noqa: PLC0415
        from resiliparse.parse.html import HTMLTree  # noqa: PLC0415
    except ImportError as exc:  # a run checks for it first; a worker that still lacks it says so per page
        raise RuntimeError("the resiliparse extractor needs the resiliparse extra: "
                           "pip install 'tlmscore[resiliparse]'") from exc
    tree = HTMLTree.parse(_decode(body, charset))
    text: str = extract_plain_text(tree, main_content=True, preserve_formatting=True, list_bullets=True)
    title: str | None = tree.title
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
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
        return _decode(body, charset)


def extract(body: bytes, content_type: str | None, url: str, extractor: Extractor = "recall") -> Extracted:
    """Extract the readable text of a fetched body.

    `content_type` is the response's `Content-Type` header (parameters allowed); `url` is where the
    body came from (trafilatura uses it to resolve links); `extractor` how an HTML page's main text
    is found. Returns status `unsupported_type` for a type no extractor handles and `empty` when
    nothing readable is left.
    """
    kind = content_kind(content_type, body)
    if kind is None:
        return Extracted(None, None, "unsupported_type")
    title: str | None = None
    if kind == "html":
        title, text = _html(body, content_type, url, extractor)
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


def extract_safely(body: bytes, content_type: str | None, url: str, extractor: Extractor = "recall") -> Extracted:
    """`extract`, with any failure of the extractors on this body as status `extract_failed`.

    Parsers meet hostile input (pypdf has raised AssertionError and AttributeError on mutated
    PDFs; lxml can run out of memory); whatever they raise is this page's problem, never the batch's.
    """
    try:
        return extract(body, content_type, url, extractor)
    except Exception as exc:  # noqa: BLE001  (one page's failure must stay that page's)
        detail = str(exc).splitlines()[0][:200] if str(exc) else ""
        reason = f"the text could not be extracted ({type(exc).__name__}{': ' + detail if detail else ''})"
        return Extracted(None, None, "extract_failed", reason)

