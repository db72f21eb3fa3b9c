"""The evidence one claim needs: all of it when it is short, else the sentences that share its words.

A model asked whether a passage supports a claim reads every token it is sent, so a claim is sent
with the evidence it needs, not the whole rendered prompt. When the available evidence fits in
`max_chars`, the passage is all of it (documents in order, a blank line between them). Otherwise
the evidence sentences are ranked by the BM25-weighted share of the claim's content words they use
(a number or name of the claim counts as a content word), and the best are taken, each with the
sentence before and after it in its document, until `max_chars` is reached; they are shown in
document order, with `…` where sentences were left out between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tlmscore.scoring.grounding._support import EvidenceIndex
from tlmscore.scoring.grounding._text import Analysis, sentences

GAP = "…"


@dataclass(frozen=True)
class ClaimPassage:
    """One answer sentence that makes a claim, and the evidence passage sent with it."""

    claim: str
    passage: str


def _texts(index: EvidenceIndex) -> list[str]:
    """The evidence sentences' texts, in the index's order (the index keeps only their analyses)."""
    return [s for doc in index.docs if doc.available for s in sentences(doc.text)]


def _relevance(index: EvidenceIndex, claim: Analysis, sentence: Analysis) -> float:
    words = (*claim.content, *claim.numbers, *claim.names)
    return sum(index.weight(w) for w in dict.fromkeys(words) if index.lexicon.forms(w) & sentence.words
               or w in sentence.numbers)


def _chosen(index: EvidenceIndex, texts: Sequence[str], claim: Analysis, max_chars: int) -> list[int]:
    """The ids of the sentences to send: the most relevant with their neighbours, within `max_chars`."""
    ranked = sorted(range(len(texts)), key=lambda i: (-_relevance(index, claim, index.sentences[i]), i))
    chosen: set[int] = set()
    used = 0
    for i in ranked:
        for j in (i, i - 1, i + 1):
            if j in chosen or not 0 <= j < len(texts) or index.sentence_doc[j] != index.sentence_doc[i]:
                continue
            if used + len(texts[j]) + 1 > max_chars:
                return sorted(chosen) or [i]
            chosen.add(j)
            used += len(texts[j]) + 1
    return sorted(chosen)


def passage_for(index: EvidenceIndex, claim: Analysis, max_chars: int) -> str:
    """The evidence passage for `claim`: all the evidence when it fits in `max_chars`, else its best sentences."""
    whole = "\n\n".join(doc.text.strip() for doc in index.docs if doc.available)
    if len(whole) <= max_chars:
        return whole
    texts = _texts(index)
    ids = _chosen(index, texts, claim, max_chars)
    parts: list[str] = []
    for n, i in enumerate(ids):
        if n and (i != ids[n - 1] + 1 or index.sentence_doc[i] != index.sentence_doc[ids[n - 1]]):
            parts.append(GAP)
        parts.append(texts[i].strip())
    return " ".join(parts)[:max_chars]
