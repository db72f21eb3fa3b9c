"""`grounding`: how well the evidence in the prompt supports each claim of the response.

Offline, no model, no key, deterministic. It measures grounding — whether what the answer says is
backed by the pages, file search results, tool outputs and instructions the model was given — not
whether it is true in the world.

Method, per input:

1. Evidence: the web pages, file search results and tool outputs in the prompt, and with them
   (option `messages`, default `context`) the instructions and system/developer messages (see
   `tlmscore.scoring.evidence`). An input with no tool result that has text is not scored
   (`messages="system"` scores it against its instructions alone).
2. Claims: each response sentence is split into clauses (at commas, semicolons, colons, dashes and
   contrasting conjunctions); a clause with something to check — at least `min_words` content
   words, or a number, date or name — is a claim, and a smaller one joins its neighbour.
3. Support `s` of a claim by the evidence: lexical overlap with the best passage times penalties
   for numbers, dates and names that do not match and for a "not" the evidence does not share
   (see `tlmscore.scoring.support` for the weights).
4. Citations: for every `url_citation` of a claim's sentence (the inline `([domain](url))` links the
   API writes, plus citation spans recorded in the `Conversation`), support `c` of the claim by the
   cited page alone. A claim with cited pages that have text counts `(s + max c) / 2`; a cited
   page that could not be retrieved is listed, not scored.
5. Score: `0.5 * mean + 0.5 * min` over the claims — half the average support, half the weakest
   claim, so one contradicted claim pulls the answer down however long it is.

`details` lists the claims below `threshold` (with the numbers, names or negation that did not
match) and the citations whose page does not support them or could not be retrieved. NaN with an
explanation when the prompt holds no evidence or the response makes no claim.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tlmscore.model import ScoringInput
from tlmscore.scoring.base import Score, parse_options
from tlmscore.scoring.evidence import Document, MessagePolicy, cited_urls, documents, strip_blocks
from tlmscore.scoring.support import EvidenceIndex
from tlmscore.scoring.text import Analysis, analyse, clauses, clean_markdown, sentences
from tlmscore.urls import url_key

__all__ = [
    "GroundingOptions",
    "GroundingScorer",
    "create",
]

_ANALYSIS_CACHE = 20_000

_SHORTEST_SPAN = 4
_LINK_URL = re.compile(r"\[[^\]]*\]\((https?://[^)\s]+)\)")
_TRAILING_CITATION = re.compile(r"([.!?][\"\u201d\u2019]*)[ \t]*(\(\s*\[[^\]]*\]\(https?://[^)\s]*\)\s*\))[ \t]*")
_LABEL = re.compile(r"(?m)^\s*(?:[-*+•]\s+)?(?:\*\*|__)[^*_\n]{1,60}?(?::\s*(?:\*\*|__)|(?:\*\*|__)\s*:)\s*")


class GroundingOptions(BaseModel):
    """Options of the `grounding` scorer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    messages: MessagePolicy = Field(
        default="context", description="which prompt messages count as evidence besides tool results: "
                                       "none; context (instructions, system and developer messages, but only "
                                       "alongside tool results); system (the same, also on their own); all "
                                       "(user and assistant messages too)")
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="support below which a claim is listed")
    min_words: int = Field(default=3, ge=1, description="content words a sentence needs to be a claim, "
                                                        "unless it has a number or a name")
    max_listed: int = Field(default=20, ge=0, description="most claims and citations listed in details")


@dataclass(frozen=True)
class _Sentence:
    text: str
    urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Claim:
    text: str
    sentence: str
    analysis: Analysis
    urls: tuple[str, ...] = ()


def _sentences(response: str) -> list[_Sentence]:
    """Response sentences without markup, each with the URLs its inline citation links point to.

    A citation link after a sentence's full stop (where the API writes it) belongs to that
    sentence, not to the next one.
    """
    found: list[_Sentence] = []
    marked = _TRAILING_CITATION.sub(r"\1 \2\n", _LABEL.sub("", strip_blocks(response)))
    for raw in sentences(marked):
        urls = tuple(url_key(u) for u in _LINK_URL.findall(raw))
        text = clean_markdown(raw)
        if analyse(text).words or not found:
            found.append(_Sentence(text, urls))
        else:
            found[-1] = _Sentence(found[-1].text, tuple(dict.fromkeys((*found[-1].urls, *urls))))
    return found


def _normal(text: str) -> str:
    return " ".join(clean_markdown(text).lower().split())


def _with_spans(found: list[_Sentence], spans: Mapping[str, tuple[str, ...]]) -> list[_Sentence]:
    """Add citations recorded as answer spans in the conversation to the sentences those spans contain."""
    result = []
    for sentence in found:
        mine = _normal(sentence.text)
        extra = [key for key, texts in spans.items() for span in texts
                 if min(len(text := _normal(span)), len(mine)) >= _SHORTEST_SPAN and (mine in text or text in mine)]
        result.append(_Sentence(sentence.text, tuple(dict.fromkeys((*sentence.urls, *extra)))))
    return result


def _checkable(found: Analysis, min_words: int) -> bool:
    return len(found.content) >= min_words or bool(found.numbers) or bool(found.names)


def _claims(sentence: _Sentence, min_words: int) -> list[_Claim]:
    """The claims of one sentence: its clauses, a clause too small to check joined to its neighbour."""
    units: list[str] = []
    pending = ""
    for part in clauses(sentence.text):
        found = analyse(part)
        if _checkable(found, min_words):
            units.append(f"{pending}, {part}" if pending else part)
            pending = ""
        elif found.content and units:
            units[-1] = f"{units[-1]}, {part}"
        elif found.content:
            pending = f"{pending}, {part}" if pending else part
    if not units and _checkable(analyse(sentence.text), min_words):
        units = [sentence.text]
    return [_Claim(unit, sentence.text, analyse(unit), sentence.urls) for unit in units]


@dataclass
class _Result:
    """Everything found for one input, before it becomes a `Score`."""

    supports: list[float] = field(default_factory=list)
    unsupported: list[dict[str, Any]] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)
    checked: int = 0


def _check_citations(index: EvidenceIndex, claim: _Claim, threshold: float, result: _Result) -> float | None:
    """The claim's best support by a page it cites, or None when none of its cited pages has text."""
    best: float | None = None
    for key in claim.urls:
        pages = [d for d, doc in enumerate(index.docs) if doc.kind == "page" and doc.key == key]
        if not pages:
            continue
        result.checked += 1
        readable = [d for d in pages if index.docs[d].available]
        if not readable:
            doc = index.docs[pages[0]]
            result.citations.append({"url": doc.source, "claim": claim.text, "status": "unavailable",
                                     "support": None, "reason": doc.reason})
            continue
        found = index.support(claim.analysis, readable)
        best = found.value if best is None else max(best, found.value)
        if found.value < threshold:
            result.citations.append({"url": index.docs[readable[0]].source, "claim": claim.text,
                                     "status": "unsupported", "support": round(found.value, 4),
                                     "missing": list(found.missing)})
    return best


def _evidence_summary(docs: Sequence[Document]) -> dict[str, int]:
    def count(kind: str, available: bool = True) -> int:
        return sum(1 for d in docs if d.kind == kind and d.available == available)
    return {"pages": count("page"), "pages_unavailable": count("page", available=False), "files": count("file"),
            "tool_outputs": count("tool"), "messages": count("message")}


def _describe(summary: Mapping[str, int]) -> str:
    names = {"pages": "page", "pages_unavailable": "unavailable page", "files": "file search result",
             "tool_outputs": "tool output", "messages": "message"}
    parts = [f"{n} {names[k]}{'s' if n != 1 else ''}" for k, n in summary.items() if n]
    return ", ".join(parts) or "nothing"


class GroundingScorer:
    """Scores each response by how well the prompt's evidence supports its sentences and citations."""

    name = "grounding"

    def __init__(self, options: GroundingOptions | None = None) -> None:
        self.options = options or GroundingOptions()
        # Pages cited by many answers are analysed once per scorer, not once per answer.
        self._analyse = functools.lru_cache(maxsize=_ANALYSIS_CACHE)(analyse)

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """One score per input; CPU-bound, so the event loop gets a turn between rows."""
        scores: list[Score] = []
        for item in inputs:
            try:
                scores.append(self.score_one(item))
            except Exception as exc:  # noqa: BLE001  (one row's failure must not abort the batch)
                scores.append(Score.failed(f"{type(exc).__name__}: {exc}"))
            await asyncio.sleep(0)
        return scores

    def score_one(self, item: ScoringInput) -> Score:
        """The grounding score of one input."""
        opts = self.options
        docs = documents(item, opts.messages)
        summary = _evidence_summary(docs)
        if not any(d.available and (d.kind != "message" or opts.messages != "context") for d in docs):
            return Score.unscorable(f"no evidence to check the answer against: no tool result with text "
                                    f"(the prompt has {_describe(summary)})", {"evidence": summary})
        claims = [claim for sentence in _with_spans(_sentences(item.response), cited_urls(item))
                  for claim in _claims(sentence, opts.min_words)]
        if not claims:
            return Score.unscorable("the response makes no statement to check", {"evidence": summary})
        index = EvidenceIndex(docs, self._analyse)
        result = _Result()
        for claim in claims:
            found = index.support(claim.analysis)
            cited = _check_citations(index, claim, opts.threshold, result)
            value = found.value if cited is None else (found.value + cited) / 2
            result.supports.append(value)
            if value < opts.threshold:
                result.unsupported.append({"claim": claim.text, "sentence": claim.sentence, "support": round(value, 4),
                                           "source": found.source, "missing": list(found.missing)})
        return self._score(result, summary, len(claims))

    def _score(self, result: _Result, summary: dict[str, int], n: int) -> Score:
        supports = result.supports
        value = 0.5 * sum(supports) / n + 0.5 * min(supports)
        weakest = sorted(result.unsupported, key=lambda u: u["support"])
        limit = self.options.max_listed
        details: dict[str, Any] = {
            "claims": n, "supported": n - len(result.unsupported), "evidence": summary,
            "support_by_claim": [round(v, 4) for v in supports],
            "unsupported": weakest[:limit], "citations_checked": result.checked,
            "citations": result.citations[:limit],
        }
        text = f"{n - len(result.unsupported)} of {n} claims supported by the evidence ({_describe(summary)})"
        bad = [c for c in result.citations if c["status"] == "unsupported"]
        gone = [c for c in result.citations if c["status"] == "unavailable"]
        if bad:
            text += f"; {len(bad)} citation{'s' if len(bad) != 1 else ''} not supported by the cited page"
        if gone:
            text += f"; {len(gone)} citation{'s' if len(gone) != 1 else ''} to pages that could not be retrieved"
        if weakest:
            worst = weakest[0]
            why = f": {', '.join(worst['missing'])}" if worst["missing"] else ""
            text += f"; weakest: “{worst['claim'][:160]}” ({worst['support']:.2f}{why})"
        return Score(round(min(max(value, 0.0), 1.0), 4), text, details)


def create(options: Mapping[str, Any]) -> GroundingScorer:
    """The registry's factory: a `GroundingScorer` from option keywords."""
    return GroundingScorer(parse_options(GroundingOptions, options, "grounding"))
