"""Evidence: the web pages that built-in web search saw, planned, fetched, cached and extracted."""

from __future__ import annotations

from tlmscore.evidence.page import PAGE_STATUSES, MemoryPages, Page, PageSource, PageStatus

__all__ = ["PAGE_STATUSES", "MemoryPages", "Page", "PageSource", "PageStatus"]
