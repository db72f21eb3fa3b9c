"""Notebook views: one transcript as a readable conversation, result tables, and plots.

Every string from a log is HTML-escaped: a transcript containing `<script>` shows it as text.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tlmscore._tables import json_cell
from tlmscore._urls import url_key
from tlmscore.convert import cited_sentence, convert_transcript
from tlmscore.errors import ConfigError
from tlmscore.evidence.layers import open_page_source
from tlmscore.evidence.page import Page, PagesByKey, keyed_pages, page_for
from tlmscore.evidence.plan import Plan
from tlmscore.ingest import ChainIndex
from tlmscore.model import Conversation, Message, ToolCall, ToolResult, Transcript, Turn, WebResult
from tlmscore.pipeline import convert_record, read_transcripts, run_sync
from tlmscore.rendering import text_words, unavailable_text
from tlmscore.settings import Settings
from tlmscore.stores import find_reader

__all__ = [
    "CSS",
    "TranscriptView",
    "least_supported",
    "not_scored",
    "plot_fetch_status",
    "plot_score_by",
    "plot_scores",
    "results_html",
]

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
    pages: PagesByKey = field(default_factory=dict)
    row: Mapping[str, Any] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)
    support: Support = _lexical_support
    converted: Conversation | None = None
    """The conversation as the run converted it (with the calls it continues); None: converted here, alone."""

    def __repr__(self) -> str:
        # the HTML view is what a notebook shows; the plain text stays one line (no log text, no paths)
        return f"TranscriptView({self.transcript.id!r}, {len(self.pages)} pages)"

    @property
    def conversation(self) -> Conversation:
        """The transcript converted to turns (as the run converted it, when the view was made from a row)."""
        return self.converted if self.converted is not None else convert_transcript(self.transcript, self.settings)

    def page(self, url: str) -> Page:
        """The page shown for `url` (an `offline_miss` page when it was not read)."""
        return page_for(self.pages, url)

    def shown_pages(self) -> list[Page]:
        """The pages of every URL the conversation refers to, in order."""
        return [self.page(url) for url in self.conversation.urls]

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
        page = self.page(url)
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
        parts = [self._highlight(str(part.get("text") or part.get("refusal") or ""), part.get("annotations") or [])
                 for part in messages[-1].get("content") or [] if isinstance(part, dict)]
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
    def from_row(cls, row: Mapping[str, Any], settings: Settings | None = None, *,
                 inputs: Sequence[str | Path] | None = None) -> TranscriptView:
        """The view of a result row as the run rendered it, for drilling into it.

        The record is read again from its file and converted by the run's own steps, with the
        earlier calls it continues (found in `inputs`, the run's inputs: by default the row's own
        file); its pages come from the saved page files and the cache, never the network.
        """
        settings = (settings or Settings()).model_copy(update={"offline": True})
        source, line = str(row["source"]), int(row["line"])
        transcript = next((t for t in read_transcripts(source, batch_inputs=settings.batch_inputs) if t.line == line),
                          None)
        if transcript is None:
            raise ConfigError(f"{source}:{line}: no such record")
        with closing(ChainIndex.build(list(inputs or [source]), batch_inputs=settings.batch_inputs,
                                      find=find_reader)) as chains:
            converted = convert_record(transcript, settings, chains).conversation
        urls = list(converted.urls) if converted is not None else []
        pages = run_sync(lambda: _offline_pages(urls, settings)) if urls else {}
        return cls(transcript, pages=pages, row=dict(row), settings=settings, converted=converted)

    def _scored_citations(self) -> list[dict[str, Any]] | None:
        """The citations a scorer judged (from the row's `details`), or None when it has none."""
        details = json_cell(self.row.get("details"))
        listed = details.get("citations") if isinstance(details, dict) else None
        return [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else None

    def _citation_status(self, url: str, sentence: str) -> str:
        """`unavailable`, `unsupported` or `supported`: the scorer's verdict when it gave one."""
        page = self.page(url)
        if not page.ok:
            return "unavailable"
        judged = self._scored_citations()
        if judged is None:
            return "supported" if self.support(sentence, page.text or "") else "unsupported"
        words = text_words(sentence)
        for entry in judged:
            claim = text_words(str(entry.get("claim") or ""))
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
    """The pages of `urls` from the saved page files and the cache, keyed by `url_key`."""
    async with open_page_source(settings) as source:
        return await keyed_pages(source, Plan.of([urls]))


def results_html(df: pd.DataFrame, columns: Sequence[str] = ("id", "model", "score", "n_urls", "n_urls_ok",
                                                             "n_urls_failed", "warnings", "error"),
                 limit: int = 50, *, sort: bool = True) -> str:
    """A compact, escaped HTML table of result rows (lowest scores first when scored, unless not `sort`)."""
    view = df.sort_values("score") if sort and "score" in df.columns else df
    shown = [c for c in columns if c in view.columns]
    table = view[shown].head(limit).to_html(escape=True, index=False, na_rep="—")
    return CSS + f'<div class="tlm">{table}</div>'


def _kind_of_evidence(details: Any) -> str:
    """What a score was checked against, from the scorer's `details`: documents, tool outputs, or neither."""
    found = details.get("evidence", {}) if isinstance(details, Mapping) else {}
    if found.get("pages", 0) or found.get("files", 0):
        return "documents"
    return "tool outputs" if found.get("tool_outputs", 0) or found.get("messages", 0) else "other"


_EVIDENCE_ORDER = {"documents": 0, "tool outputs": 1, "other": 2}


def least_supported(df: pd.DataFrame, limit: int | None = None) -> pd.DataFrame:
    """Scored rows, the answers their evidence supports least first, with an `evidence` column.

    Answers checked against documents (the pages they cite, the files they searched) come first,
    lowest score first: there claims are compared with the text they cite. Answers whose only
    evidence is a tool's output (JSON, logs) come next: a short answer checked word by word against
    structured output can score low while faithful ("could not reach" for `"timed_out": true`), so
    those are for reading in the drill-down rather than for heading the list. Rows with no score
    (NaN) are not here: `not_scored` says why they have none.
    """
    scored = df[df["score"].notna()]
    kind = scored["details"].map(_kind_of_evidence) if "details" in scored.columns else "other"
    ranked = scored.assign(evidence=kind)
    ordered: pd.DataFrame = ranked.assign(_rank=ranked["evidence"].map(_EVIDENCE_ORDER)).sort_values(
        ["_rank", "score"], kind="stable").drop(columns="_rank")
    return ordered if limit is None else ordered.head(limit)


def _why_not_scored(error: Any, explanation: Any) -> str:
    if isinstance(error, str) and error:
        return "error: the record could not be read, rendered or scored"
    said = str(explanation).split(":")[0].strip() if isinstance(explanation, str) else ""
    return said or "no score given"


def not_scored(df: pd.DataFrame) -> pd.DataFrame:
    """Why rows have no score (NaN): one line per reason, with its count of rows and up to three ids."""
    missing = df[df["score"].isna()]
    none = pd.Series(None, index=missing.index)  # for a column the rows do not have
    reasons = [_why_not_scored(e, x) for e, x in zip(missing.get("error", none), missing.get("explanation", none),
                                                       strict=True)]
    grouped = missing.assign(reason=reasons).groupby("reason", sort=False)
    table: pd.DataFrame = pd.DataFrame({"rows": grouped.size(), "examples": grouped["id"].agg(
        lambda ids: ", ".join(map(str, list(ids)[:3])))}).reset_index()
    return table


def plot_scores(df: pd.DataFrame, ax: Any = None, title: str = "Scores of the scored answers") -> Any:
    """Histogram of scores."""
    ax = ax or _pyplot().subplots(figsize=(6, 3))[1]
    ax.hist(df["score"].dropna(), bins=20, range=(0, 1), color="#3b82f6")
    ax.set_xlabel("score")
    ax.set_ylabel("answers")
    _whole_numbers(ax.yaxis)
    ax.set_title(title)
    return ax


def _pyplot() -> Any:
    """`matplotlib.pyplot`, or an `ImportError` of one line naming the extra that installs it."""
    try:
        import matplotlib.pyplot as plt  # noqa: PLC0415  (plotting is optional)
    except ImportError:
        raise ImportError("tlmscore.audit's plots need matplotlib: pip install 'tlmscore[notebook]'") from None
    return plt


def _whole_numbers(axis: Any) -> None:
    """Ticks at whole numbers only: the axis counts answers or pages."""
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    axis.set_major_locator(MaxNLocator(integer=True))


def plot_score_by(df: pd.DataFrame, column: str = "model", ax: Any = None, title: str | None = None) -> Any:
    """Mean score per value of `column` (e.g. model or tool type); titled "Mean score by <column>" unless `title`."""
    ax = ax or _pyplot().subplots(figsize=(6, 3))[1]
    df.groupby(column)["score"].mean().sort_values().plot.barh(ax=ax, color="#10b981")
    ax.set_xlabel("mean score")
    ax.set_title(title or f"Mean score by {column}")
    return ax


def plot_fetch_status(pages: Sequence[Page], ax: Any = None, title: str = "Pages by fetch status") -> Any:
    """Counts of page fetch statuses."""
    ax = ax or _pyplot().subplots(figsize=(6, 3))[1]
    counts = pd.Series([p.status for p in pages]).value_counts()
    counts.plot.bar(ax=ax, color=["#16a34a" if s == "ok" else "#dc2626" for s in counts.index])
    ax.set_ylabel("pages")
    _whole_numbers(ax.yaxis)
    ax.set_title(title)
    return ax
