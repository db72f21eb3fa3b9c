"""How well evidence passages support one claim: lexical overlap times agreement of exact facts.

`EvidenceIndex` splits evidence documents into sentences and passages (runs of one to three
adjacent sentences; a short JSON tool output, whose `key: value` lines belong together, also as a
whole) and answers `support(claim)`:

- `lexical`: the share of the claim's content words found in the passage, each weighted by its
  BM25 inverse document frequency over the evidence sentences. A word is found when the passage
  uses it or, with a `Lexicon` (WordNet, `tlmscore.scoring.grounding._lexicon`), a synonym of it. A
  passage's words include its document's topic (a page's title and the words of at least a fifth
  of its sentences), which a sentence about the topic need not repeat.
- `together`: order-aware matching. Of the claim's neighbouring content words (in the claim's
  order) that the passage has both of, the share it has in one sentence. Words that a passage
  holds apart ("the board rejected the plan; the union accepted the offer" against "the board
  accepted the plan") do not support the relation the claim puts between them.
- `agreement`: a penalty for each exact fact that does not match — a number or date missing from
  the passage *`NUMBER_MISSING` (unless a structured tool output's numbers give it by arithmetic:
  `derived`); a name missing from the passage *`NAME_ELSEWHERE` when its
  document has it elsewhere, else *`NAME_MISSING` (a word starting a sentence is a name when the
  evidence never writes it in lower case) — and *`NEGATION_MISMATCH` when the claim says
  "not" where the closest evidence clauses do not, or says it positively where every close
  evidence clause says "not". Polarity is judged against all the evidence searched, so a passage
  cannot support a claim by leaving out the sentence that contradicts it. A claim word (a stop
  word too: `more`/`fewer`, `above`/`below`) that its document never uses (nor a word it
  starts), but whose opposite (`OPPOSITES`: increase/decrease, win/lose, …, and with a `Lexicon`
  WordNet's antonyms) the passage does, counts *`OPPOSITE`.

Support is `(lexical * together) ** LEXICAL_POWER * agreement` of the best of the passages with
the most lexical overlap. A passage of a page a model summarised (`Document.summary`) is weaker
evidence: of its support above `Rules.summary_above` (the scorer's threshold), only
`Rules.summary_weight` counts, so a summary makes a claim less supported than the page's own text
saying the same would, and a claim it does not support stays as unsupported as before.
The square root keeps a paraphrase (words the passage says otherwise) well above a claim whose
facts disagree: grounding is about the facts, and wording differs between faithful answers too.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from tlmscore.scoring.grounding._evidence import Document
from tlmscore.scoring.grounding._lexicon import Lexicon
from tlmscore.scoring.grounding._text import OPPOSITES, STOPWORDS, Analysis, analysed_sentences

NUMBER_MISSING = 0.2
NAME_ELSEWHERE = 0.6
NAME_MISSING = 0.25
NEGATION_MISMATCH = 0.2
OPPOSITE = 0.2
LEXICAL_POWER = 0.5
_CANDIDATES = 25
_WIDTHS = (1, 2, 3)
_CLAUSE_WORDS = 2
_WHOLE_TOOL_OUTPUT = 40
STATED_VALUES = 0.5
_DERIVED_FROM = 12  # numbers of a passage a derived figure may come from (pairs of the first twelve)
_SMALLEST_DERIVED = 10  # a small whole number is too easily some difference of two others


@dataclass(frozen=True)
class Rules:
    """Which of the optional checks support makes (the scorer's options; see `GroundingOptions`).

    `together`: neighbouring claim words must share a sentence of the passage. `polarity`: when a
    positive claim clause disagrees with the evidence on "not" — `every` close evidence clause says
    "not", or the `closest` ones (most words shared) all do. `stop_opposites`: opposites are looked
    up for stop words too (`more`/`fewer`, `above`/`below`), not only for content words.
    `summary_weight`: the share of its margin above `summary_above` that support found in a page a
    model summarised keeps.
    """

    together: bool = True
    polarity: Literal["every", "closest"] = "every"
    stop_opposites: bool = True
    summary_weight: float = 1.0
    summary_above: float = 0.5


@dataclass(frozen=True)
class Support:
    """A claim's support: the value in [0, 1], the document it came from, and what did not match.

    The signals it was made of, for a fitted combination (`_signals`): `lexical` (the weighted share
    of the claim's words the passage has), `together` (the share of neighbouring pairs it holds in
    one sentence), and how many numbers, names and opposites did not match and whether "not" did.
    """

    value: float
    source: str | None = None
    missing: tuple[str, ...] = ()
    lexical: float = 0.0
    together: float = 1.0
    numbers: int = 0
    names: int = 0
    opposites: int = 0
    negation: bool = False


class EvidenceIndex:
    """Evidence sentences and passages with word postings and BM25 inverse document frequencies."""

    def __init__(self, docs: Sequence[Document], reader: Callable[[str], Sequence[Analysis]] = analysed_sentences,
                 lexicon: Lexicon | None = None, rules: Rules | None = None) -> None:
        """Index `docs`; `reader` (a cached one, when given) turns a document's text into analysed sentences.

        `lexicon` supplies synonyms and antonyms (none without it); `rules` the optional checks.
        """
        self.docs = list(docs)
        self.lexicon = lexicon or Lexicon()
        self.rules = rules or Rules()
        self._read = reader
        self.sentences: list[Analysis] = []
        self.sentence_doc: list[int] = []
        self.passages: list[tuple[int, tuple[int, ...]]] = []
        self.doc_words: list[frozenset[str]] = []
        self.words: list[frozenset[str]] = []
        self.whole: list[int] = []  # the passages that are a whole short structured tool output
        for d, doc in enumerate(self.docs):
            self._add(d, doc)
        self.numbers = [frozenset(n for i in ids for n in self.sentences[i].numbers) for _, ids in self.passages]
        self.postings = _postings(self.words)
        self.sentence_postings = _postings([s.words for s in self.sentences])
        n = len(self.sentences)
        self.idf = {w: math.log(1 + (n - len(ids) + 0.5) / (len(ids) + 0.5))
                    for w, ids in self.sentence_postings.items()}
        self.unseen = math.log(1 + (n - 0.5) / 1.5)
        self.lowered = frozenset().union(*(s.lowered for s in self.sentences))

    def _add(self, d: int, doc: Document) -> None:
        """Split one document into sentences and passages; a passage's words include the document's topic."""
        first = len(self.sentences)
        self.sentences += self._read(doc.text) if doc.available else []
        ids = range(first, len(self.sentences))
        self.sentence_doc += [d] * len(ids)
        spans = [tuple(range(i, i + width)) for width in _WIDTHS for i in ids if i + width <= ids.stop]
        if doc.structured and 0 < len(ids) <= _WHOLE_TOOL_OUTPUT:  # an unavailable one has no sentence
            if len(ids) > max(_WIDTHS):
                spans.append(tuple(ids))
            self.whole.append(len(self.passages) + spans.index(tuple(ids)))
        topic = self._topic(doc, ids)
        self.passages += [(d, span) for span in spans]
        self.words += [topic.union(*(self.sentences[i].words for i in span)) for span in spans]
        self.doc_words.append(frozenset().union(*(self.sentences[i].words for i in ids)))

    def _topic(self, doc: Document, ids: range) -> frozenset[str]:
        """What a document is about: its title (a page's first line) and its frequent words."""
        counts = Counter(word for i in ids for word in self.sentences[i].words)
        floor = max(3, math.ceil(len(ids) / 5))
        frequent = {w for w, k in counts.items() if k >= floor}
        title = self.sentences[ids.start].words if doc.kind == "page" and len(ids) else frozenset()
        return frozenset(frequent | (title - STOPWORDS))

    def weight(self, word: str) -> float:
        """The BM25 inverse document frequency of `word` over the evidence sentences.

        A word the evidence never uses weighs as much as one it uses once: rarity in the evidence
        is what makes a word informative, and a paraphrase's filler words should not outweigh it.
        """
        return self.idf.get(word, self.unseen)

    def weighed(self, value: float, doc: int) -> float:
        """`value`, the support of a passage of document `doc`, as weak as the document is (see the module)."""
        above = self.rules.summary_above
        if not self.docs[doc].summary or value <= above:
            return value
        return above + self.rules.summary_weight * (value - above)

    def support(self, claim: Analysis, docs: Iterable[int] | None = None) -> Support:
        """The claim's best support by one passage (of the documents `docs`, when given)."""
        allowed = None if docs is None else frozenset(docs)
        overlap, total = self._overlap(claim, allowed)
        negation = self._polarity_differs(claim, allowed)
        forms = [self.lexicon.forms(w) for w in claim.content]
        names = (*claim.names, *(w for w in claim.initials if w in self.sentence_postings and w not in self.lowered))
        best = self._stated(claim, names, allowed, negation)
        opposites = self._opposites(claim)
        for p in sorted(overlap, key=lambda q: (-overlap[q], q))[:_CANDIDATES]:
            if (overlap[p] / total) ** LEXICAL_POWER <= best.value:
                break  # every factor below is at most 1, and overlaps only fall from here: none can win
            factor, missing = self._agreement(claim, names, opposites, p)
            if negation:
                factor *= NEGATION_MISMATCH
                missing += ("negation differs",)
            if (overlap[p] / total) ** LEXICAL_POWER * factor <= best.value:
                continue  # `together` is at most 1: this passage cannot win
            together, apart = self._together(claim, forms, p) if self.rules.together else (1.0, [])
            # weighed never raises a value: the bounds above still hold
            value = self.weighed((overlap[p] / total * together) ** LEXICAL_POWER * factor, self.passages[p][0])
            if value > best.value:
                missing += tuple(f"{a} and {b} not together in the source" for a, b in apart)
                best = Support(value, self.docs[self.passages[p][0]].source, missing, overlap[p] / total, together,
                               *_counts(claim, names, missing), negation)
        return best

    def _stated(self, claim: Analysis, names: Sequence[str], allowed: frozenset[int] | None,
                negation: bool) -> Support:
        """The claim's support by a short structured tool output that states its numbers, else none.

        A sentence that states a table's or a JSON object's values ("17 orders are currently late"
        against `count: 17`) takes its other words from the question, not from the output. When
        every number of the claim is one of the output's (or derived from two of them) and every
        name is there, it counts `STATED_VALUES`, raised towards 1 by the share of its words the
        output has too (`(STATED_VALUES + (1 - STATED_VALUES) * lexical) ** LEXICAL_POWER`).
        """
        if not claim.numbers:
            return Support(0.0)
        best = Support(0.0)
        for p in self.whole:
            doc = self.passages[p][0]
            if (allowed is not None and doc not in allowed) or any(n not in self.words[p] for n in names):
                continue
            if not all(n in self.numbers[p] or derived(n, self.numbers[p]) for n in claim.numbers):
                continue
            weights = [self.weight(w) for w in claim.content]
            found = sum(x for w, x in zip(claim.content, weights, strict=True) if self.lexicon.forms(w) & self.words[p])
            lexical = found / sum(weights) if weights else 1.0
            value = (STATED_VALUES + (1 - STATED_VALUES) * lexical) ** LEXICAL_POWER
            value = self.weighed(value * (NEGATION_MISMATCH if negation else 1.0), doc)
            if value > best.value:
                best = Support(value, self.docs[doc].source, ("negation differs",) if negation else (), lexical,
                               negation=negation)
        return best

    def _together(self, claim: Analysis, forms: Sequence[frozenset[str]],
                  p: int) -> tuple[float, list[tuple[str, str]]]:
        """The share of the claim's neighbouring word pairs that passage `p` has in one sentence, and the others.

        `forms`: each claim content word's matching stems. Only pairs whose two words the passage
        has (topic included) count; 1.0 when there is none.
        """
        held = [self.sentences[i].words for i in self.passages[p][1]]
        pairs = [(a, b, forms[i], forms[i + 1]) for i, (a, b) in enumerate(itertools.pairwise(claim.content))
                 if forms[i] & self.words[p] and forms[i + 1] & self.words[p]]
        apart = [(a, b) for a, b, x, y in pairs if not any(x & words and y & words for words in held)]
        return (1 - len(apart) / len(pairs) if pairs else 1.0), apart

    def _overlap(self, claim: Analysis, allowed: frozenset[int] | None) -> tuple[dict[int, float], float]:
        """Weighted overlap (synonyms count) of every passage sharing a word with the claim, and the claim's weight."""
        overlap: dict[int, float] = {}
        for word in claim.content:
            forms = self.lexicon.forms(word)
            if len(forms) == 1:
                found: Iterable[int] = self.postings.get(next(iter(forms)), ())
            else:  # a passage with two forms of the word counts it once
                found = {p for form in forms for p in self.postings.get(form, ())}
            weight = self.weight(word)
            for p in found:
                if allowed is None or self.passages[p][0] in allowed:
                    overlap[p] = overlap.get(p, 0.0) + weight
        if claim.content:
            return overlap, sum(self.weight(w) for w in claim.content)
        wanted = set(claim.numbers)
        return {p: 1.0 for p, nums in enumerate(self.numbers)
                if wanted & nums and (allowed is None or self.passages[p][0] in allowed)}, 1.0

    def _opposites(self, claim: Analysis) -> list[tuple[str, frozenset[str]]]:
        """Each claim word that has opposites (stop words too: more/fewer, above/below), with them, in word order."""
        words = sorted(claim.words if self.rules.stop_opposites else frozenset(claim.content))
        found = ((word, OPPOSITES.get(word, frozenset()) | self.lexicon.opposites(word)) for word in words)
        return [(word, opposite) for word, opposite in found if opposite]

    def _agreement(self, claim: Analysis, names: Sequence[str], opposites: Sequence[tuple[str, frozenset[str]]],
                   p: int) -> tuple[float, tuple[str, ...]]:
        doc = self.passages[p][0]
        factor = 1.0
        missing: list[str] = []
        computed = self.docs[doc].structured  # figures are derived from a tool's values, not from prose
        for number in claim.numbers:
            if number not in self.numbers[p] and not (computed and derived(number, self.numbers[p])):
                factor *= NUMBER_MISSING
                missing.append(f"number {number}")
        for name in names:
            if name not in self.words[p]:
                elsewhere = name in self.doc_words[doc]
                factor *= NAME_ELSEWHERE if elsewhere else NAME_MISSING
                missing.append(f"name {name}" + (" (elsewhere in the source)" if elsewhere else ""))
        for word, opposites_of_word in opposites:
            opposite = opposites_of_word & self.words[p]
            if opposite and not self._uses(doc, word):
                factor *= OPPOSITE
                missing.append(f"{word}: the source says {', '.join(sorted(opposite))}")
        return factor, tuple(missing)

    def _uses(self, doc: int, word: str) -> bool:
        """Whether document `doc` uses `word` or a longer word it starts (`depart`, `departure`)."""
        words = self.doc_words[doc]
        return word in words or any(w.startswith(word) for w in words)

    def _polarity_differs(self, claim: Analysis, allowed: frozenset[int] | None) -> bool:
        """True when a claim clause and the evidence clauses closest to it disagree on "not".

        A negated claim clause needs a negated evidence clause sharing most of its words; a
        positive one disagrees when every evidence clause sharing most of its words is negated (one
        that says it positively supports it).
        """
        for words, negated in claim.clauses:
            if len(words) < _CLAUSE_WORDS:
                continue
            need = max(_CLAUSE_WORDS, len(words) // 2)
            ids = sorted({i for w in words for i in self.sentence_postings.get(w, ())
                          if allowed is None or self.sentence_doc[i] in allowed})
            scored = [(len(words & w), n) for i in ids for w, n in self.sentences[i].clauses]
            close = [(k, n) for k, n in scored if k >= need]
            if negated and not any(n for _, n in close):
                return True
            if not negated and close and self.rules.polarity == "closest":
                top = max(k for k, _ in close)
                close = [(k, n) for k, n in close if k == top]
            if not negated and close and all(n for _, n in close):
                return True
        return False


def _counts(claim: Analysis, names: Sequence[str], missing: Sequence[str]) -> tuple[int, int, int]:
    """How many of the claim's numbers, names and opposite-bearing words `_agreement` found unmatched."""
    numbers = sum(1 for m in missing if m.startswith("number "))
    unmatched_names = sum(1 for m in missing if m.startswith("name "))
    opposites = sum(1 for m in missing if ": the source says " in m)
    return min(numbers, len(claim.numbers)), min(unmatched_names, len(names)), opposites


_YEARS = (1000, 2100)


def _year(number: str) -> bool:
    """Whether a number reads as a year (a whole number from 1000 to 2100): never a figure derived by arithmetic."""
    return number.isdigit() and _YEARS[0] <= int(number) <= _YEARS[1]


def _decimals(number: str) -> int:
    return len(number.partition(".")[2])


def derived(number: str, found: frozenset[str]) -> bool:
    """Whether `number` is a sum, difference, ratio, percentage or percent change of two numbers in `found`.

    "A surplus of 11 units" from 42 and 31, "grew 58.3%" from 120 and 190, rounded as the claim
    writes it. Small whole numbers (below `_SMALLEST_DERIVED`) never count: too many pairs give them;
    nor do years, as a result or as a term (2002 is not 2000 + 2).
    """
    target = float(number)
    places = _decimals(number)
    if not found or (target < _SMALLEST_DERIVED and not places) or _year(number):
        return False
    values = [float(n) for n in sorted(found) if not _year(n)][:_DERIVED_FROM]
    for a, b in itertools.permutations(values, 2):
        candidates = [a + b, a - b]
        if b:
            candidates += [a / b, a / b * 100, (a - b) / b * 100]
        if any(round(c, places) == target for c in candidates):
            return True
    return False


def _postings(word_sets: Sequence[frozenset[str]]) -> dict[str, list[int]]:
    """Word → the positions of the sets that contain it, in order."""
    found: dict[str, list[int]] = {}
    for position, words in enumerate(word_sets):
        for word in words:
            found.setdefault(word, []).append(position)
    return found
