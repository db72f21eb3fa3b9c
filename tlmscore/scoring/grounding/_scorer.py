"""The `grounding` scorer: options, evidence and claims gathered, supports combined into a score (see the package)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tlmscore.model import ScoringInput
from tlmscore.scoring.base import Score, parse_options, score_rows
from tlmscore.scoring.grounding._claims import Claim, answer_sentences, claims_of, unfinished, with_spans
from tlmscore.scoring.grounding._evidence import (
    IMAGE_ONLY,
    Document,
    MessagePolicy,
    cited_urls,
    documents,
    numbered,
)
from tlmscore.scoring.grounding._lexicon import Lexicon, load_lexicon, wordnet_folder
from tlmscore.scoring.grounding._passages import ClaimPassage, passage_for
from tlmscore.scoring.grounding._recent import Recent
from tlmscore.scoring.grounding._signals import FEATURES, ClaimSignals, features
from tlmscore.scoring.grounding._support import EvidenceIndex, Rules, Support
from tlmscore.scoring.grounding._text import Analysis, analyse, analysed_sentences

_ANALYSIS_CACHE = 20_000
_DOCUMENT_CHARS = 500_000
_INDEX_CHARS = 500_000
# The score: this share of the claims' mean support, the rest their weakest (0.3 beat 0.5 on both development
# sets: docs/validity.md).
MEAN_SHARE = 0.3
_COMPLETE = ("completed", "")  # a status with a detail ("completed:stop") counts by its head


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
    incomplete: float = Field(default=0.8, ge=0.0, le=1.0,
                              description="factor on the score of an answer whose status is not `completed` "
                                          "(cut short: what is there is scored, an unfinished last sentence "
                                          "is left out)")
    lexicon: bool = Field(default=False, description="match synonyms and antonyms from WordNet when a database is "
                                                     "installed (extra `tlmscore[wordnet]`); off by default: it "
                                                     "lowered claims against cited pages (docs/validity.md)")
    synonyms: bool = Field(default=True, description="with a WordNet lexicon: a synonym counts as a match")
    antonyms: bool = Field(default=True, description="with a WordNet lexicon: an antonym the evidence says instead "
                                                     "counts as an opposite")
    together: bool = Field(default=True, description="neighbouring claim words must share an evidence sentence")
    polarity: Literal["every", "closest"] = Field(
        default="every", description="a positive claim clause disagrees on \"not\" when every close evidence "
                                     "clause says \"not\" (every), or the closest ones all do (closest)")
    stop_opposites: bool = Field(default=True, description="opposites are checked on stop words too "
                                                           "(more/fewer, above/below)")
    summary_weight: float = Field(default=0.8, ge=0.0, le=1.0,
                                  description="a page a model read and summarised (--page-source chat) is weaker "
                                              "evidence: of a claim's support by it above `threshold`, this share "
                                              "counts (a claim it fully supports counts 0.9; docs/validity.md)")


@dataclass
class _Result:
    """Everything found for one input, before it becomes a `Score`."""

    supports: list[float] = field(default_factory=list)
    unsupported: list[dict[str, Any]] = field(default_factory=list)
    partial: list[dict[str, Any]] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)
    checked: int = 0
    signals: list[ClaimSignals] = field(default_factory=list)


def _check_citations(index: EvidenceIndex, claim: Claim, threshold: float, result: _Result) -> float | None:
    """The claim's best support by a source it cites, or None when none of its cited sources has text."""
    best: float | None = None
    for key in claim.urls:
        pages = [d for d, doc in enumerate(index.docs) if doc.key == key]
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


def _claim_support(index: EvidenceIndex, claim: Claim, threshold: float) -> tuple[float, Support, list[dict[str, Any]]]:
    """A claim's support, its best match, and its unsupported parts when other parts are supported.

    A claim of one part counts its own support. A claim of several counts the mean of its parts'
    supports, each part checked on its own: supported unevenly, it lands between supported and
    contradicted, and the parts below `threshold` are named.
    """
    whole = index.support(claim.analysis)
    if len(claim.parts) < 2:  # noqa: PLR2004  (one part: the claim itself)
        return whole.value, whole, []
    found = [(part, index.support(part.analysis)) for part in claim.parts]
    value = sum(f.value for _, f in found) / len(found)
    weak = [{"part": part.text, "support": round(f.value, 4), "missing": list(f.missing)}
            for part, f in found if f.value < threshold]
    return value, whole, weak if len(weak) < len(found) else []


def _evidence_summary(docs: Sequence[Document]) -> dict[str, int]:
    def count(kind: str, available: bool = True) -> int:
        return sum(1 for d in docs if d.kind == kind and d.available == available)
    summary = {"pages": count("page"), "pages_unavailable": count("page", available=False), "files": count("file"),
               "tool_outputs": count("tool"), "messages": count("message")}
    summarised = sum(1 for d in docs if d.summary and d.available)
    images = sum(1 for d in docs if d.reason == IMAGE_ONLY)
    return (summary | ({"pages_read_by_a_model": summarised} if summarised else {})
            | ({"tool_outputs_image_only": images} if images else {}))


def _plural(n: int, name: str) -> str:
    head, _, rest = name.partition(" that ")
    return f"{n} {head}{'s' if n != 1 else ''}" + (f" that {rest.replace('is', 'are') if n != 1 else rest}"
                                                   if rest else "")


def _describe(summary: Mapping[str, int]) -> str:
    names = {"pages": "page", "pages_unavailable": "unavailable page", "files": "file search result",
             "tool_outputs": "tool output", "messages": "message",
             "pages_read_by_a_model": "page that a model read",
             "tool_outputs_image_only": "tool output that is only an image"}
    parts = [_plural(n, names[k]) for k, n in summary.items() if n]
    return ", ".join(parts) or "nothing"


class GroundingScorer:
    """Scores each response by how well the prompt's evidence supports its sentences and citations."""

    name = "grounding"
    cpu_bound = True
    """Pure Python on the run's CPU: a run scores its chunks in worker processes, one per core."""

    def __init__(self, options: GroundingOptions | None = None) -> None:
        self.options = options or GroundingOptions()
        self._lexicon = _chosen(load_lexicon(wordnet_folder() if self.options.lexicon else None), self.options)
        self._rules = Rules(self.options.together, self.options.polarity, self.options.stop_opposites,
                            self.options.summary_weight, self.options.threshold)
        # Pages cited by many answers are analysed once per scorer, not once per answer.
        self._analyse = functools.lru_cache(maxsize=_ANALYSIS_CACHE)(analyse)
        self._read: Recent[str, tuple[Analysis, ...]] = Recent(
            functools.partial(analysed_sentences, analyser=self._analyse), len, _DOCUMENT_CHARS)
        # Answers in a batch often share their evidence: the same documents give the same index.
        self._index: Recent[tuple[Document, ...], EvidenceIndex] = Recent(
            lambda docs: EvidenceIndex(docs, self._read, self._lexicon, self._rules),
            lambda docs: sum(len(d.text) for d in docs), _INDEX_CHARS)

    def __reduce__(self) -> tuple[type[GroundingScorer], tuple[GroundingOptions]]:
        """Pickled as its options: a worker process builds its own scorer (its caches start empty)."""
        return GroundingScorer, (self.options,)

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """One score per input, one row at a time: CPU-bound, so the event loop gets a turn between rows."""

        async def one(item: ScoringInput) -> Score:
            return self.score_one(item)

        return await score_rows(inputs, one, concurrency=1)

    def _claims(self, item: ScoringInput) -> tuple[EvidenceIndex, dict[str, int], list[Claim]] | Score:
        """The input's evidence (indexed), its summary and the answer's claims, or the unscorable `Score`."""
        opts = self.options
        docs = documents(item, opts.messages)
        summary = _evidence_summary(docs)
        if not any(d.available and (d.kind != "message" or opts.messages != "context") for d in docs):
            return Score.unscorable(f"no evidence to check the answer against: no tool result with text "
                                    f"(the prompt has {_describe(summary)})", {"evidence": summary})
        complete = item.status.split(":", 1)[0] in _COMPLETE
        answer = item.response if complete else unfinished(item.response)
        found = with_spans(answer_sentences(answer, self._analyse), cited_urls(item), numbered(item))
        claims = [claim for sentence in found for claim in claims_of(sentence, opts.min_words, self._analyse)]
        if not claims:
            why = "the response makes no statement to check"
            return Score.unscorable(why if complete else f"{why} (status {item.status})", {"evidence": summary})
        return self._index(tuple(docs)), summary, claims

    def claim_passages(self, item: ScoringInput, max_chars: int) -> list[ClaimPassage] | Score:
        """Each answer sentence that makes a claim, with the evidence it needs (`_passages`), or the unscorable `Score`.

        The sentences and the evidence are those this scorer checks (the same claims, the same
        documents), so a model asked about them sees what grounding scored.
        """
        found = self._claims(item)
        if isinstance(found, Score):
            return found
        index, _, claims = found
        checked = list(dict.fromkeys(claim.sentence for claim in claims))
        return [ClaimPassage(text, passage_for(index, self._analyse(text), max_chars)) for text in checked]

    def score_one(self, item: ScoringInput) -> Score:
        """The grounding score of one input."""
        opts = self.options
        found = self._claims(item)
        if isinstance(found, Score):
            return found
        index, summary, claims = found
        complete = item.status.split(":", 1)[0] in _COMPLETE
        result = _Result()
        for claim in claims:
            value, best, parts = _claim_support(index, claim, opts.threshold)
            cited = _check_citations(index, claim, opts.threshold, result)
            value = value if cited is None else (value + cited) / 2
            result.supports.append(value)
            result.signals.append(ClaimSignals(value, best.lexical, best.together, best.numbers > 0, best.names > 0,
                                               best.negation, best.opposites > 0, bool(parts),
                                               cited is not None and cited < opts.threshold))
            if value < opts.threshold or parts:
                entry = {"claim": claim.text, "sentence": claim.sentence, "support": round(value, 4),
                         "source": best.source, "missing": list(best.missing)}
                (result.unsupported if value < opts.threshold else result.partial).append(
                    {**entry, "unsupported_parts": parts} if parts else entry)
        score = self._score(result, summary, len(claims), None if complete else item.status)
        summaries = [{"url": e.url, "note": e.note} for e in item.evidence or () if e.origin == "model" and e.note]
        if summaries:  # pages a model read: which, by whom and when (`--page-source chat`)
            score = replace(score, details={**score.details, "summarised_pages": summaries[:self.options.max_listed]})
        return score

    def _score(self, result: _Result, summary: dict[str, int], n: int, status: str | None) -> Score:
        supports = result.supports
        value = MEAN_SHARE * sum(supports) / n + (1 - MEAN_SHARE) * min(supports)
        weakest = sorted(result.unsupported, key=lambda u: u["support"])
        limit = self.options.max_listed
        details: dict[str, Any] = {
            "claims": n, "supported": n - len(result.unsupported), "evidence": summary,
            "support_by_claim": [round(v, 4) for v in supports],
            "unsupported": weakest[:limit], "partially_supported": result.partial[:limit],
            "citations_checked": result.checked, "citations": result.citations[:limit],
            "lexicon": self._lexicon.source or None,
            "signals": dict(zip(FEATURES, (round(v, 4) for v in features(result.signals, self.options.threshold)),
                                strict=True)),
        }
        text = f"{n - len(result.unsupported)} of {n} claims supported by the evidence ({_describe(summary)})"
        if status is not None:
            value *= self.options.incomplete
            details["status"] = status
            text = f"answer not complete ({status}): {text}"
        text += _citation_text(result.citations)
        if result.partial:
            part = result.partial[0]["unsupported_parts"][0]
            text += f"; {len(result.partial)} partly supported, e.g. not “{part['part'][:120]}”"
        if weakest:
            worst = weakest[0]
            why = f": {', '.join(worst['missing'])}" if worst["missing"] else ""
            text += f"; weakest: “{worst['claim'][:160]}” ({worst['support']:.2f}{why})"
        return Score(round(min(max(value, 0.0), 1.0), 4), text, details)


def _chosen(lexicon: Lexicon, options: GroundingOptions) -> Lexicon:
    """`lexicon` with only the relations `options` asks for (synonyms, antonyms, both or neither)."""
    empty: Mapping[str, frozenset[str]] = MappingProxyType({})
    if not options.synonyms:
        lexicon = replace(lexicon, senses=empty, members=empty, _forms={})  # its own cache: no sense, no form
    if not options.antonyms:
        lexicon = replace(lexicon, antonyms=empty)
    return lexicon


def _citation_text(citations: Sequence[Mapping[str, Any]]) -> str:
    """What the explanation says about citations not supported by their source or not retrievable."""
    bad = sum(c["status"] == "unsupported" for c in citations)
    gone = sum(c["status"] == "unavailable" for c in citations)
    return ((f"; {_plural(bad, 'citation')} not supported by the cited source" if bad else "")
            + (f"; {_plural(gone, 'citation')} to sources that could not be retrieved" if gone else ""))


def create(options: Mapping[str, Any]) -> GroundingScorer:
    """The registry's factory: a `GroundingScorer` from option keywords."""
    return GroundingScorer(parse_options(GroundingOptions, options, "grounding"))
