"""Imported where extraction workers start, so every worker is warm before its first page.

It is imported by the template that forks the workers, or by each spawned worker.
Importing this module imports trafilatura and extracts `WARM_UP_PAGE` and `_BRIEF_PAGE`:
trafilatura builds its tables on first use, and doing that here, while the first responses are
still on their way, keeps that cost off the first real pages. The brief page is there for the
path short pages take: too little text for trafilatura's own extractor, so it tries jusText,
whose stop-word lists for every language it builds on first use (about a quarter of a second
of CPU, more than most pages cost).
"""

from __future__ import annotations

from tlmscore.evidence.extract import WARM_UP_PAGE, extract

_BRIEF_PAGE = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>Ferry</title></head><body>"
    b"<nav><a href='/'>Home</a></nav><article><h1>Ferry</h1>"
    b"<p>The ferry leaves every twenty minutes from the north pier.</p></article>"
    b"<footer>Footer</footer></body></html>"
)

for _page in (WARM_UP_PAGE, _BRIEF_PAGE):
    extract(_page, "text/html", "")
