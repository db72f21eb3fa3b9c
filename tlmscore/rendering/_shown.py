"""The evidence render shows, built as text for the prompt and as `Evidence` values for scorers.

Pure: pages are looked up by `url_key` in the mapping given. Each page entry of a web tool's response is
written once here, and the same budgeted text becomes the `Evidence` value, so scorers read
exactly what the prompt shows. Pages the answer numbers carry their number (`"citation": "[n]"`);
what the provider logged about a page (snippet, date) stands beside the fetched text and is the
evidence when the page could not be fetched.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tlmscore._urls import url_key
from tlmscore.convert import FILE_SEARCH_NOT_LOGGED, NOT_LOGGED, SEARCH_NOT_LOGGED, UNCITED
from tlmscore.evidence.page import Page, PagesByKey, page_for
from tlmscore.model import Evidence, FileResult, ToolResult, Turn, WebRef, WebResult
from tlmscore.rendering._excerpt import allocate, excerpt
from tlmscore.settings import Settings

FAILED_CALL = "This call failed and returned no results."
SHOWN_ABOVE = "This page is also among the results of an earlier call: its content is shown there."
UNLOGGED_NOTE = ("Pages the answer cites that are not among the logged search results: where the model "
                 "found them is not known.")
_NOT_LOGGED = (NOT_LOGGED, FILE_SEARCH_NOT_LOGGED, SEARCH_NOT_LOGGED)
_UNCITED_HEAD, _, _UNCITED_TAIL = UNCITED.partition("{n}")


def _is_uncited(output: str) -> bool:
    """A search's note that the answer cites none of its results (which are not shown)."""
    return output.startswith(_UNCITED_HEAD) and output.endswith(_UNCITED_TAIL)


def unavailable_text(page: Page) -> str:
    """What the scorer is told about a page that could not be retrieved: that, and why."""
    reason = page.error or page.status.replace("_", " ")
    return (f"This page could not be retrieved ({page.status}: {reason}). Its content is unknown; "
            "nothing here confirms or refutes what the answer says about it.")


def model_note(page: Page) -> str | None:
    """What the prompt says of a page a model read (`source` `model`): whose summary it is, and when."""
    if page.source != "model" or not page.ok:
        return None
    when = page.fetched_at
    day = time.strftime("%Y-%m-%d", time.gmtime(when)) if when is not None else "an unknown date"
    return f"summarised by {page.model or 'a model'} on {day}, not the page itself"


class PageShelf:
    """Pages for one prompt: looked up, given their share of the evidence budget, and kept.

    Each page entry it writes is also kept as an `Evidence` value, in prompt order (`shown`).
    """

    def __init__(self, pages: PagesByKey, refs: Sequence[tuple[WebRef, tuple[str, ...]]],
                 settings: Settings) -> None:
        self._pages = pages
        keys = [url_key(ref.url) for ref, _ in refs]
        repeats = [keys.index(key) != i and not focus
                   for i, (key, (_, focus)) in enumerate(zip(keys, refs, strict=True))]
        texts = [(p.text or "") if (p := page_for(pages, ref.url)).ok and not repeat else ""
                 for (ref, _), repeat in zip(refs, repeats, strict=True)]  # a page shown again takes no budget
        self._budgets = allocate([len(t) for t in texts], settings.page_chars, settings.evidence_chars)
        self._next = 0
        self._listed: set[str] = set()
        self.shown: list[Evidence] = []

    def entry(self, ref: WebRef, focus: tuple[str, ...], result: WebResult) -> dict[str, Any]:
        """One page as the web tool's response shows it: number, url, title, logged snippet, content.

        A page a search lists again, after it was shown in full, is shown once: the second place
        refers to the first (a page action with its own focus still shows its passages).
        """
        page = page_for(self._pages, ref.url)
        budget = self._budgets[self._next]
        self._next += 1
        key = url_key(ref.url)
        citation = {"citation": f"[{ref.number}]"} if ref.number is not None else {}
        if key in self._listed and not focus:
            return {**citation, "url": ref.url, "content": SHOWN_ABOVE}
        self._listed.add(key)
        title = page.title or ref.title
        note = model_note(page)
        about = {"title": title, "date": ref.date, "snippet": ref.snippet, "note": note}
        text = excerpt(page.text or "", budget, (*focus, *ref.cited)) if page.ok else ""
        entry = {**citation, "url": ref.url, **{k: v for k, v in about.items() if v},
                 "content": text if page.ok else unavailable_text(page)}
        self.shown.append(Evidence(
            kind="page", text=text or (ref.snippet or ""), available=page.ok or bool(ref.snippet),
            status=page.status, call_id=None if result.unlogged else result.call_id,
            tool=None if result.unlogged else result.name, number=ref.number, url=ref.url, title=title,
            doc_id=ref.url, origin=(page.source or "live") if page.ok else ("log" if ref.snippet else None),
            snippet=ref.snippet, date=ref.date, error=None if page.ok else page.error, note=note))
        return entry

    def failed(self, result: WebResult) -> dict[str, Any]:
        """A failed web call's response: that it failed, and nothing else."""
        self.shown.append(Evidence(kind="tool", text="", available=False, status="failed", call_id=result.call_id,
                                   tool=result.name))
        return {"status": "failed", "error": FAILED_CALL}


def _shown_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, indent=2, ensure_ascii=False)


def _file_evidence(turn: FileResult) -> list[Evidence]:
    if not isinstance(turn.output, list):
        return [Evidence(kind="file", text="", available=False, status="not_logged", call_id=turn.call_id,
                         tool=turn.name)]
    found: list[Evidence] = []
    for result in turn.output:
        if not isinstance(result, dict):
            continue
        file_id = str(result.get("file_id") or "") or None
        text, filename = result.get("text"), result.get("filename")
        found.append(Evidence(kind="file", text=_shown_text(text) if text is not None else "", call_id=turn.call_id,
                              tool=turn.name, title=filename if isinstance(filename, str) else None,
                              doc_id=file_id, origin="log"))
    return found


def tool_evidence(turn: ToolResult) -> list[Evidence]:
    """A tool's response as evidence: each file search result, or the whole output as shown."""
    if isinstance(turn, FileResult):
        return _file_evidence(turn)
    output = turn.output
    if isinstance(output, str) and (output in _NOT_LOGGED or _is_uncited(output)):
        return [Evidence(kind="tool", text="", available=False, status="not_logged", call_id=turn.call_id,
                         tool=turn.name)]
    if isinstance(output, dict) and output.get("error") is not None:
        return [Evidence(kind="tool", text=_shown_text(output), available=False, status="failed",
                         call_id=turn.call_id, tool=turn.name)]
    return [Evidence(kind="tool", text=_shown_text(output), call_id=turn.call_id, tool=turn.name, origin="log")]


def _spans(response: str, sentences: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """Every place in `response` where one of `sentences` stands, in order."""
    found: set[tuple[int, int]] = set()
    for sentence in sentences:
        at = response.find(sentence) if sentence else -1
        while at >= 0:
            found.add((at, at + len(sentence)))
            at = response.find(sentence, at + len(sentence))
    return tuple(sorted(found))


def cite_spans(evidence: Sequence[Evidence], turns: Sequence[Turn], response: str) -> tuple[Evidence, ...]:
    """`evidence` with the spans of the rendered response that cite each page or file."""
    by_url: dict[str, list[str]] = {}
    by_file: dict[str, list[str]] = {}
    for turn in turns:
        if isinstance(turn, WebResult):
            for ref in turn.refs:
                by_url.setdefault(ref.url, []).extend(ref.cited)
        elif isinstance(turn, FileResult):
            for file_id, sentences in turn.cited:
                by_file.setdefault(file_id, []).extend(sentences)
    out: list[Evidence] = []
    for ev in evidence:
        citing = by_url.get(ev.url or "", []) if ev.kind == "page" else \
            by_file.get(ev.doc_id or "", []) if ev.kind == "file" else []
        out.append(replace(ev, cited=_spans(response, citing)) if citing else ev)
    return tuple(out)
