"""The claims of a response: sentences without markup or citation markers, clauses, and their parts.

- A list of sources (`[^1]: …`, `[1]: https://…`, `[1] [Title](https://…)`) is not a claim.
- Reasoning written into the answer (`<think>…</think>`, also an unclosed `<think>` or a bare
  `</think>` closing reasoning at the start) is never a claim.
- Citation markers of every style (`[1]`, `[1][2]`, `.[1]` with no space, xAI's `[[1]](url)`,
  `([domain](url))`, `【1†source】`) never count as words, numbers or claims: they are read as the
  sentence's citations (URLs, or numbers that render's evidence resolves) and removed. A run of
  markers after a sentence's full stop belongs to that sentence.
- A sentence that speaks to the reader — a question, an offer ("Let me know if …", "Would you like
  me to:" and the options listed after it), a statement of intent ("I'll check …") — is not a claim.
- A remark on how the answer's own tools were called ("The tools were called sequentially because
  `getDemand` cannot be called in parallel") is about the transcript, not about what the tools
  found: no tool output states it, so it is not a claim. One that states a figure stays a claim.
- A sentence is split into clauses (commas, semicolons, dashes, "but", …); a clause with something
  to check (`min_words` content words, or a number, date or name) is a claim, a smaller one joins
  its neighbour. A claim is split once more into parts where a new predicate starts (", and",
  "and is", ", which", ", with", "because", …), so a claim whose parts are supported unevenly can
  say which part is not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tlmscore._urls import url_key
from tlmscore.scoring.grounding._evidence import strip_blocks
from tlmscore.scoring.grounding._text import (
    CITATION_MARKER,
    Analysis,
    analyse,
    clauses,
    clean_markdown,
    marker_numbers,
    sentences,
)

_SHORTEST_SPAN = 4
_PART_WORDS = 2
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)|\A.*?</think>", re.DOTALL | re.IGNORECASE)
_LINK_URL = re.compile(r"\[[^\]]*\]\((https?://[^)\s]+)\)")
_MARKER_URL = re.compile(r"\((https?://[^)\s]+)\)")
_TRAILING = re.compile(r"([.!?\u3002\uff01\uff1f][\"\u201d\u2019]*)[ \t]*"
                       rf"((?:(?:{CITATION_MARKER.pattern})[ \t]*)+)")
# A source list line: `[^1]: …`, `[1]: …`, or a marker followed by a link or URL.
_SOURCE_LINE = re.compile(r"(?m)^[ \t]*\[\^?\d{1,3}\](?::.*|[ \t]*(?:\[[^\]\n]*\]\()?https?://.*)$")
_LABEL = re.compile(r"(?m)^\s*(?:[-*+•]\s+)?(?:\*\*|__)[^*_\n]{1,60}?(?::\s*(?:\*\*|__)|(?:\*\*|__)\s*:)\s*")
# Where a new predicate starts: "and" before a verb or pronoun ("and is", "and it"), not "yellow and blue".
_PART = re.compile(r"\s+and\s+(?=(?:is|was|are|were|has|have|had|will|would|can|could|also|then|it|its|they|"
                   r"their|he|his|she|her|we|our)\b)|,\s+(?:and|which|who|with|including|whereby)\s+"
                   r"|\s+(?:as well as|because|whereby)\s+", re.IGNORECASE)
# What an answer says to the reader rather than about the world: a closing question or offer, a statement of
# intent. "If you want …" and "I can …" count only as the reader's wishes and the writer's offers, so "If you
# earn more, you pay more" and "I can confirm that …" stay claims.
_TO_THE_READER = re.compile(
    r"^(?:(?:and|or|so|also|otherwise|alternatively|meanwhile|next)\b,?\s+)?(?:"
    r"(?:just\s+|please\s+|simply\s+)?(?:let\s+me\s+know|feel\s+free|don['\u2019]?t\s+hesitate|tell\s+me\b)"
    r"|if\s+(?:you|you['\u2019]d|you\s+would)\s+(?:like|want|wish|prefer|need\s+(?:more|any|anything|help|further))\b"
    r"|if\s+you\s+(?:tell\s+me|meant|have\s+(?:any\s+)?(?:other|more|further)?\s*questions)\b"
    r"|(?:would|do|shall|should|could|can)\s+(?:you|i|we)\s+(?:like|want|prefer|help|check|look|proceed|go|try)\b"
    r"|(?:want|need)\s+me\s+to\b|shall\s+i\b|should\s+i\b"
    r"|i\s*(?:['\u2019]ll|will|['\u2019]d\s+be\s+happy|would\s+be\s+happy|am\s+happy|['\u2019]m\s+happy|can|could)\s+"
    r"(?!confirm\b|see\b|report\b)"
    r"|let\s+me\s+(?:check|look|see|find|know|search|verify|try|fetch|pull|get|run)\b"
    r"|(?:i\s+)?hope\s+(?:this|that|it)\s+helps\b|happy\s+to\s+help\b)", re.IGNORECASE)
# A remark on the answer's own tool calls: it names tools (or function calls) and how they were called.
_CALLS_NAMED = re.compile(r"\btools?\b|\b(?:tool|function)\s+calls?\b", re.IGNORECASE)
_CALLED = re.compile(r"\b(?:call(?:ed|ing|s)?|invok(?:ed|ing|es)?|execut(?:ed|ing|es)?)\b"
                     r"|\bin\s+(?:parallel|sequence)\b|\bsequentially\b", re.IGNORECASE)
_QUESTION = re.compile(r"\?[\s\"\u201d\u2019)\]*_`]*(?:[^\w\s]\s*)*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+")
_FINISHED = re.compile(r"[.!?\u3002\uff01\uff1f\u061f\u0964)\]\"\u201d\u2019*`]\s*\Z")


@dataclass(frozen=True)
class Sentence:
    """A response sentence without markup, with the evidence keys and numbers its citations name."""

    text: str
    urls: tuple[str, ...] = ()
    numbers: tuple[int, ...] = ()


@dataclass(frozen=True)
class Part:
    """A part of a claim, checked on its own."""

    text: str
    analysis: Analysis


@dataclass(frozen=True)
class Claim:
    """A checkable clause of a sentence, its citations, and its parts (one or more)."""

    text: str
    sentence: str
    analysis: Analysis
    urls: tuple[str, ...] = ()
    parts: tuple[Part, ...] = ()


def unfinished(response: str) -> str:
    """`response` without its last sentence when that was cut off (it does not end a sentence)."""
    text = response.rstrip()
    if not text or _FINISHED.search(text):
        return text
    cut = max(text.rfind(". "), text.rfind("\n"), text.rfind("\u3002"))
    return text[:cut + 1] if cut >= 0 else ""


def _citations(raw: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The URL keys and source numbers cited in one raw sentence."""
    urls = [url_key(u) for u in _LINK_URL.findall(raw)]
    numbers: list[int] = []
    for m in CITATION_MARKER.finditer(raw):
        urls += [url_key(u) for u in _MARKER_URL.findall(m.group(0))]
        numbers += marker_numbers(m.group(0))
    return tuple(dict.fromkeys(urls)), tuple(dict.fromkeys(numbers))


def answer_sentences(response: str, analyser: Callable[[str], Analysis] = analyse) -> list[Sentence]:
    """Response sentences without reasoning, markup or markers, each with what its citations name.

    A sentence with no word of its own (a bare marker line, a lone link) gives its citations to
    the sentence before it.
    """
    found: list[Sentence] = []
    text = _SOURCE_LINE.sub("", _THINK.sub(" ", response))
    text = _TRAILING.sub(r"\1 \2\n", _LABEL.sub("", strip_blocks(text)))
    offering = False  # inside the list of options an offer ("Would you like me to:") introduced
    for raw in sentences(text):
        urls, numbers = _citations(raw)
        plain = clean_markdown(raw)
        if (offering and _LIST_ITEM.match(raw)) or to_the_reader(plain) or about_the_calls(plain, analyser):
            offering = offering or plain.rstrip().endswith(":")
            continue
        offering = False
        if analyser(plain).words or not found:
            found.append(Sentence(plain, urls, numbers))
        else:
            last = found[-1]
            found[-1] = Sentence(last.text, tuple(dict.fromkeys((*last.urls, *urls))),
                                 tuple(dict.fromkeys((*last.numbers, *numbers))))
    return found


def to_the_reader(sentence: str) -> bool:
    """Whether a sentence speaks to the reader instead of stating something: a question, an offer, an intent.

    A question ("Would you like a chart?"), an offer or invitation ("Let me know if …", "If you'd
    like, I can …"), a statement of intent ("I'll check the logs.") makes no claim the evidence
    could support, and scoring it as one would mark a faithful answer down.
    """
    text = sentence.strip()
    return bool(_QUESTION.search(text) or _TO_THE_READER.match(text))


def about_the_calls(sentence: str, analyser: Callable[[str], Analysis] = analyse) -> bool:
    """Whether a sentence remarks on how the answer's tools were called, stating no figure.

    "The tools were called sequentially because getDemand cannot be called in parallel" says how
    the answer was made; no tool output states it, and scoring it as a claim marked an answer
    that matched its tool output exactly down to 0.33. "The function call returned 17 rows"
    states a figure, and stays a claim.
    """
    return bool(_CALLS_NAMED.search(sentence) and _CALLED.search(sentence) and not analyser(sentence).numbers)


def _normal(text: str) -> str:
    return " ".join(clean_markdown(text).lower().split())


def with_spans(found: list[Sentence], spans: Mapping[str, tuple[str, ...]],
               numbered: Mapping[int, str]) -> list[Sentence]:
    """Sentences with the evidence their numbers name and the citation spans they contain."""
    result = []
    for sentence in found:
        mine = _normal(sentence.text)
        extra = [key for key, texts in spans.items() for span in texts
                 if min(len(text := _normal(span)), len(mine)) >= _SHORTEST_SPAN and (mine in text or text in mine)]
        named = [numbered[n] for n in sentence.numbers if n in numbered]
        result.append(Sentence(sentence.text, tuple(dict.fromkeys((*sentence.urls, *named, *extra))),
                               sentence.numbers))
    return result


def _checkable(found: Analysis, min_words: int) -> bool:
    return len(found.content) >= min_words or bool(found.numbers) or bool(found.names)


def _join(units: list[str], min_words: int, pieces: list[str], analyser: Callable[[str], Analysis]) -> list[str]:
    """`pieces` with every one too small to check joined to its neighbour."""
    pending = ""
    for piece in pieces:
        found = analyser(piece)
        if _checkable(found, min_words):
            units.append(f"{pending}, {piece}" if pending else piece)
            pending = ""
        elif found.content and units:
            units[-1] = f"{units[-1]}, {piece}"
        elif found.content:
            pending = f"{pending}, {piece}" if pending else piece
    return units


def _parts(text: str, analyser: Callable[[str], Analysis]) -> tuple[Part, ...]:
    """The parts of a claim: pieces between "and", "which", "with", … that have something to check."""
    pieces = [p.strip() for p in _PART.split(text) if p.strip()]
    units = _join([], _PART_WORDS, pieces, analyser) if len(pieces) > 1 else [text]
    return tuple(Part(unit, analyser(unit)) for unit in units or [text])


def claims_of(sentence: Sentence, min_words: int, analyser: Callable[[str], Analysis] = analyse) -> list[Claim]:
    """The claims of one sentence: its clauses, a clause too small to check joined to its neighbour."""
    units = _join([], min_words, clauses(sentence.text), analyser)
    if not units and _checkable(analyser(sentence.text), min_words):
        units = [sentence.text]
    return [Claim(unit, sentence.text, analyser(unit), sentence.urls, _parts(unit, analyser)) for unit in units]
