"""Evidence: the web pages that built-in web search saw, planned, fetched, cached and extracted."""

from __future__ import annotations

from tlmscore.evidence.page import PAGE_STATUSES, MemoryPages, Page, PagesByKey, PageSource, PageStatus, page_for
from tlmscore.evidence.plan import Plan

__all__ = ["PAGE_STATUSES", "MemoryPages", "Page", "PageSource", "PageStatus", "PagesByKey", "Plan", "page_for"]
