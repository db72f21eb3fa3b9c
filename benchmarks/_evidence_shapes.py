"""The validity sets' evidence in other shapes: a cited web page, a model's summary of it, or both halves.

`_validity.py` builds each labelled row as a record whose evidence is a function call's output
(`tool`, its default). `as_pages` turns such records into web search records whose answer cites a
page holding the same text, served from memory:

- `page`: one page, fetched (`source="live"`);
- `summary`: one page, read by a model (`source="model"`: what `--page-source chat` gives), which the
  grounding scorer counts as weaker evidence (option `summary_weight`);
- `mixed`: the text split in two pages near its middle, the first fetched, the second read by a model
  (a search whose one page refused the fetcher).

The summary's text is the page's own here: the shapes measure what the marking does to a score,
not how good a model's summary is.
"""

from __future__ import annotations

from typing import Any

from tlmscore.evidence.page import MemoryPages, Page

SHAPES = ("tool", "page", "summary", "mixed")
READ_AT = 1_767_225_600.0  # 2026-01-01, a fixed date: the same prompt bytes in every run


def _halves(text: str) -> tuple[str, str]:
    """`text` cut in two near its middle, at a line break, else at a sentence's end, else at a space."""
    middle = len(text) // 2
    for mark in ("\n", ". ", " "):
        before, after = text.rfind(mark, 0, middle), text.find(mark, middle)
        cuts = [c for c in (before, after) if c > 0]
        if cuts:
            cut = min(cuts, key=lambda c: abs(c - middle)) + len(mark)
            return text[:cut].strip(), text[cut:].strip()
    return text, ""


def _page(url: str, text: str, source: str) -> Page:
    return Page(url=url, status="ok", text=text, final_url=url, fetched_at=READ_AT, source=source,  # type: ignore[arg-type]
                model="page-reader" if source == "model" else None)


def _web_record(record: dict[str, Any], urls: list[str]) -> dict[str, Any]:
    """`record` with a web search whose answer cites `urls` (the whole answer cites each) as its evidence."""
    question = record["request"]["input"][0]
    answer = record["response"]["output"][-1]
    text = answer["content"][0]["text"]
    rid = record["id"]
    cites = [{"type": "url_citation", "url": u, "title": "Source", "start_index": 0, "end_index": len(text)}
             for u in urls]
    output = [{"type": "web_search_call", "id": f"ws_{rid}", "status": "completed",
               "action": {"type": "search", "query": "source", "sources": [{"type": "url", "url": u} for u in urls]}},
              {**answer, "content": [{**answer["content"][0], "annotations": cites}]}]
    return {**record, "request": {"model": record["request"]["model"], "input": [question],
                                  "tools": [{"type": "web_search"}]},
            "response": {**record["response"], "output": output}}


def as_pages(records: list[dict[str, Any]], shape: str) -> tuple[list[dict[str, Any]], MemoryPages | None]:
    """`records` (evidence as a function call's output) in `shape`, with the pages they cite."""
    if shape == "tool":
        return records, None
    out: list[dict[str, Any]] = []
    pages: list[Page] = []
    for record in records:
        document = str(record["request"]["input"][2]["output"])
        url = f"https://evidence.test/{record['id']}"
        if shape == "mixed":
            first, second = _halves(document)
            made = [_page(f"{url}/a", first, "live"), _page(f"{url}/b", second, "model")]
        else:
            made = [_page(url, document, "model" if shape == "summary" else "live")]
        made = [p for p in made if p.text]
        pages += made
        out.append(_web_record(record, [p.url for p in made]))
    return out, MemoryPages(pages)
