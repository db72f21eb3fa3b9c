"""Imported by each extraction worker as it starts, so the worker is warm before its first page.

Importing this module imports trafilatura and extracts `WARM_UP_PAGE`: trafilatura builds its
tables on first use, and doing that here, while the first responses are still on their way,
keeps that cost off the first real page.
"""

from __future__ import annotations

from tlmscore.evidence.extract import WARM_UP_PAGE, extract

WARMED = extract(WARM_UP_PAGE, "text/html", "").status == "ok"
"""Whether the warm-up page extracted as expected (it always should)."""
