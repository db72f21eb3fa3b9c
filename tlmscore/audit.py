"""Notebook views: one transcript as a readable conversation, result tables, and plots.

Every string from a log is HTML-escaped: a transcript containing `<script>` shows it as text.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tlmscore._urls import url_key
from tlmscore.convert import convert_transcript
from tlmscore.convert._citations import cited_sentence
from tlmscore.errors import ConfigError
from tlmscore.evidence.page import Page, find_page
from tlmscore.evidence.sources import open_page_source
from tlmscore.ingest import read_transcripts
from tlmscore.model import Conversation, Message, ToolCall, ToolResult, Transcript, Turn, WebResult
from tlmscore.pipeline._run import run_sync
from tlmscore.rendering._shown import unavailable_text
from tlmscore.settings import Settings

__all__ = ["CSS", "TranscriptView", "plot_fetch_status", "plot_score_by", "plot_scores", "results_html"]

Support = Callable[[str, str], bool]
_MIN_WORD = 4
_SUPPORTED_SHARE = 0.6

CSS = """
<style>
.tlm{font-family:system-ui,sans-serif;font-size:14px;max-width:980px;line-height:1.45}
.tlm .turn{border-left:4px solid #ccc;margin:6px 0;padding:4px 10px;white-space:pre-wrap}
.tlm .user{border-color:#3b82f6}.tlm .assistant{border-color:#10b981}.tlm .system{border-color:#9ca3af}
.tlm .tool{border-color:#f59e0b}.tlm .role{font-weight:600;font-size:12px;color:#555;display:block}
.tlm pre{background:#f6f8fa;padding:6px;overflow-x:auto;white-space:pre-wrap;max-height:320px}
.tlm mark.supported{background:#bbf7d0}.tlm mark.unsupported{background:#fecaca}
.tlm mark.unavailable{background:#e5e7eb;text-decoration:underline dotted}
.tlm .badge{border-radius:4px;padding:1px 6px;font-size:11px;color:#fff}
.tlm .ok{background:#16a34a}.tlm .failed{background:#dc2626}
.tlm .answer{border:2px solid #10b981;padding:8px;white-space:pre-wrap}
.tlm .head{font-size:16px;font-weight:600}.tlm .warn{color:#b45309}
</style>
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"\w+", text)}


def _lexical_support(sentence: str, text: str) -> bool:
    """Whether most content words of `sentence` appear in `text` (a fallback when no scorer said)."""
    words = {w.strip(".,;:()[]\"'“”").lower() for w in sentence.split()}
    words = {w for w in words if len(w) >= _MIN_WORD and not w.startswith("http")}
    if not words:
        return False
    haystack = text.lower()
    return sum(1 for w in words if w in haystack) / len(words) >= _SUPPORTED_SHARE


@dataclass
class TranscriptView:
    """One transcript with its pages, shown in Jupyter as a conversation with evidence."""

    transcript: Transcript
    pages: Mapping[str, Page] = field(default_factory=dict)
    row: Mapping[str, Any] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)
    support: Support = _lexical_support

    @property
    def conversation(self) -> Conversation:
        """The transcript converted to turns."""
        return convert_transcript(self.transcript, self.settings)

    def _page(self, url: str) -> Page:
        return find_page(self.pages, url)

    def _page_anchor(self, url: str) -> str:
        return "p-" + hashlib.sha256(url_key(url).encode()).hexdigest()[:12]

    def _turn(self, turn: Turn) -> str:
        if isinstance(turn, Message):
            role = "system" if turn.role in ("system", "developer") else turn.role
            return (f'<div class="turn {_e(role)}"><span class="role">{_e(turn.name or turn.role)}</span>'
                    f"{_e(turn.text)}</div>")
        if isinstance(turn, ToolCall):
            args = json.dumps(turn.arguments, indent=2, ensure_ascii=False, default=str)
            kind = "built-in tool call" if turn.server else "tool call"
            return (f'<div class="turn assistant"><details><summary>{kind}: <b>{_e(turn.name)}</b></summary>'
                    f"<pre>{_e(args)}</pre></details></div>")
        if isinstance(turn, WebResult):
            return f'<div class="turn tool"><span class="role">{_e(turn.name)} results</span>' + "".join(
                self._page_html(ref.url, ref.title) for ref in turn.refs) + "</div>"
        assert isinstance(turn, ToolResult)  # noqa: S101  (Turn is a closed union)
        out = turn.output if isinstance(turn.output, str) else json.dumps(turn.output, indent=2, ensure_ascii=False)
        return (f'<div class="turn tool"><details><summary>tool response: <b>{_e(turn.name)}</b></summary>'
                f"<pre>{_e(out)}</pre></details></div>")

    def _page_html(self, url: str, title: str | None) -> str:
        page = self._page(url)
        badge = f'<span class="badge {"ok" if page.ok else "failed"}">{_e(page.status)}</span>'
        body = page.text if page.ok else unavailable_text(page)
        name = page.title or title or url
        return (f'<details id="{self._page_anchor(url)}"><summary>{badge} {_e(name)} — '
                f'<a href="{_e(url)}" target="_blank" rel="noopener">{_e(url)}</a></summary>'
                f"<pre>{_e((body or '')[:20000])}</pre></details>")

    def _answer_html(self) -> str:
        output = self.transcript.response.get("output") or []
        messages = [i for i in output if isinstance(i, dict) and i.get("type") == "message"]
        if not messages:
            return '<div class="answer">' + _e(self.row.get("response") or "") + "</div>"
        parts = []
        for part in messages[-1].get("content") or []:
            if isinstance(part, dict):
                parts.append(self._highlight(str(part.get("text") or part.get("refusal") or ""),
                                             part.get("annotations") or []))
        return '<div class="answer">' + "\n".join(parts) + "</div>"

    def _highlight(self, text: str, annotations: Sequence[Any]) -> str:
        spans = sorted((a for a in annotations if isinstance(a, dict) and a.get("type") == "url_citation"
                        and isinstance(a.get("start_index"), int) and isinstance(a.get("end_index"), int)),
                       key=lambda a: a["start_index"])
        out, pos = [], 0
        for ann in spans:
            start, end = ann["start_index"], ann["end_index"]
            if start < pos or end > len(text):
                continue
            kind = self._citation_status(str(ann["url"]), cited_sentence(text, start, end))
            out.append(_e(text[pos:start]))
            out.append(f'<a href="#{self._page_anchor(str(ann["url"]))}"><mark class="{kind}" title="{kind}">'
                       f"{_e(text[start:end])}</mark></a>")
            pos = end
        out.append(_e(text[pos:]))
        return "".join(out)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], settings: Settings | None = None) -> TranscriptView:
        """The view of a result row, for drilling into it.

        The record is read again from its file; its pages come from the saved page files and the
        cache, never the network.
        """
        settings = (settings or Settings()).model_copy(update={"offline": True})
        source, line = str(row["source"]), int(row["line"])
        transcript = next((t for t in read_transcripts(source) if t.line == line), None)
        if transcript is None:
            raise ConfigError(f"{source}:{line}: no such record")
        urls = list(convert_transcript(transcript, settings).urls) if transcript.error is None else []
        pages = run_sync(lambda: _offline_pages(urls, settings)) if urls else {}
        return cls(transcript, pages=pages, row=dict(row), settings=settings)

    def _scored_citations(self) -> list[dict[str, Any]] | None:
        """The citations a scorer judged (from the row's `details`), or None when it has none."""
        details = self.row.get("details")
        if isinstance(details, str):
            try:
                details = json.loads(details)
            except json.JSONDecodeError:
                return None
        listed = details.get("citations") if isinstance(details, dict) else None
        return [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else None

    def _citation_status(self, url: str, sentence: str) -> str:
        """`unavailable`, `unsupported` or `supported`: the scorer's verdict when it gave one."""
        page = self._page(url)
        if not page.ok:
            return "unavailable"
        judged = self._scored_citations()
        if judged is None:
            return "supported" if self.support(sentence, page.text or "") else "unsupported"
        words = _words(sentence)
        for entry in judged:
            claim = _words(str(entry.get("claim") or ""))
            if url_key(str(entry.get("url"))) == url_key(url) and claim and len(claim & words) >= 0.8 * len(claim):
                return "supported" if entry.get("status") == "supported" else "unsupported"
        return "supported"

    def _repr_html_(self) -> str:
        conv = self.conversation
        score = self.row.get("score")
        head = f"{_e(self.transcript.id)} · {_e(self.transcript.model or '')}"
        if isinstance(score, float) and not math.isnan(score):
            head += f" · score {score:.3f}"
        warnings = "".join(f'<div class="warn">⚠ {_e(w)}</div>' for w in conv.warnings)
        tools = "".join(f"<pre>{_e(json.dumps(t, ensure_ascii=False))}</pre>" for t in conv.tools)
        parts = [CSS, '<div class="tlm">', f'<div class="head">{head}</div>', warnings]
        if conv.instructions:
            parts.append(f'<div class="turn system"><span class="role">instructions</span>'
                         f"{_e(conv.instructions)}</div>")
        if tools:
            parts.append(f"<details><summary>tools ({len(conv.tools)})</summary>{tools}</details>")
        parts += [self._turn(t) for t in conv.turns]
        parts += ['<span class="role">answer</span>', self._answer_html(), "</div>"]
        return "".join(parts)


async def _offline_pages(urls: Sequence[str], settings: Settings) -> dict[str, Page]:
    async with open_page_source(settings) as source:
        return await source.pages(urls)


def results_html(df: pd.DataFrame, columns: Sequence[str] = ("id", "model", "score", "n_urls", "n_urls_ok",
                                                             "n_urls_failed", "warnings", "error"),
                 limit: int = 50) -> str:
    """A compact, escaped HTML table of result rows (lowest scores first when scored)."""
    view = df.sort_values("score") if "score" in df.columns else df
    shown = [c for c in columns if c in view.columns]
    table = view[shown].head(limit).to_html(escape=True, index=False, na_rep="—")
    return CSS + f'<div class="tlm">{table}</div>'


def plot_scores(df: pd.DataFrame, ax: Any = None) -> Any:
    """Histogram of scores."""
    import matplotlib.pyplot as plt  # noqa: PLC0415  (plotting is optional)

    ax = ax or plt.subplots(figsize=(6, 3))[1]
    ax.hist(df["score"].dropna(), bins=20, range=(0, 1), color="#3b82f6")
    ax.set_xlabel("score")
    ax.set_ylabel("answers")
    return ax


def plot_score_by(df: pd.DataFrame, column: str = "model", ax: Any = None) -> Any:
    """Mean score per value of `column` (e.g. model or tool type)."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    ax = ax or plt.subplots(figsize=(6, 3))[1]
    df.groupby(column)["score"].mean().sort_values().plot.barh(ax=ax, color="#10b981")
    ax.set_xlabel("mean score")
    return ax


def plot_fetch_status(pages: Sequence[Page], ax: Any = None) -> Any:
    """Counts of page fetch statuses."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    ax = ax or plt.subplots(figsize=(6, 3))[1]
    counts = pd.Series([p.status for p in pages]).value_counts()
    counts.plot.bar(ax=ax, color=["#16a34a" if s == "ok" else "#dc2626" for s in counts.index])
    ax.set_ylabel("pages")
    return ax
