"""Loaded once by the extraction workers' forkserver, so every worker forked from it starts warm.

Importing this module imports trafilatura and extracts `WARM_UP_PAGE`: trafilatura builds its
tables on first use (about 0.1 s of CPU), and doing that here, before the workers are forked,
pays it once per run instead of once per worker.
"""

from __future__ import annotations

from tlmscore.evidence.extract import WARM_UP_PAGE, extract

__all__ = ["WARMED"]

WARMED = extract(WARM_UP_PAGE, "text/html", "").status == "ok"
"""Whether the warm-up page extracted as expected (it always should)."""
