"""One citation model for every style an answer cites its sources in.

Styles read (each becomes a `Citation`: the source it names and the sentence of the answer it closes):

- `url_citation` annotations with `start_index`/`end_index` (OpenAI Responses, Azure);
- `url_citation` annotations without indices (xAI): located through the answer's `[[n]](url)`
  marker or markdown link for that URL, when there is one;
- `[[n]](url)` markers in the text (xAI inline citations);
- `[n]` markers (or in the lenticular brackets U+3010/U+3011 of Chinese answers), alone or in runs
  (`[1][2]`), numbering a logged source list (Perplexity and other search-augmented chat
  providers; the record is rebuilt with a `url_citation` per marker carrying its `number`, and an
  `unresolved_citation` for a marker with no source);
- markdown links `[label](url)` the annotations do not cover;
- `[n]` markers beside `url_citation` annotations that carry no place: the n-th distinct
  annotated URL (other OpenAI-compatible search backends);
- `file_citation` annotations (`file_id`, `filename`, `index`).

A marker right after a sentence end (`…tall.[1] Beta…`, with or without a space) closes that
sentence; `.!?` (and the Arabic question mark, the Devanagari danda) end a sentence before white
space, the end, or a marker; the CJK full stop, exclamation and question marks (U+3002, U+FF01,
U+FF1F, U+FF0E) end one wherever they stand; so does a newline.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tlmscore._urls import url_key

_MARKER = r"(?:\[\[\d{1,4}\]\]\([^)\s]*\)|\[\d{1,4}\]|\u3010\d{1,4}\u3011)"
MARKER_RUN = re.compile(rf"{_MARKER}+")
_XAI_MARKER = re.compile(r"\[\[(\d{1,4})\]\]\(([^)\s]+)\)")
_BARE_MARKER = re.compile(r"(?<!\[)\[(\d{1,4})\](?![\](])|\u3010(\d{1,4})\u3011")
_MD_LINK = re.compile(r"(?<![\[!])\[([^\[\]\n]{1,300})\]\((https?://[^)\s]+)\)")
# `.!?`, the Arabic question mark and the Devanagari danda before white space; the CJK full stop,
# exclamation and question marks (ideographic and full-width) anywhere.
_SENTENCE_END = re.compile(rf"[.!?\u061f\u0964]{_MARKER}*(?=\s|$)|[\u3002\uff01\uff1f\uff0e]{_MARKER}*|\n")
_WORD_BEFORE = re.compile(r"(\w+)\.$")
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "vs", "inc", "ltd", "co", "corp",
                            "no", "fig", "approx", "est", "dept", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
                            "sep", "sept", "oct", "nov", "dec", "mt", "ft"})
_NUMERIC_TITLE = re.compile(r"\s*\[?\s*\d+\s*\]?\s*")


@dataclass(frozen=True)
class Citation:
    """A citation in an answer: the source it names and the sentence of the answer it supports.

    `url` is the cited page (empty for a file); `number` the answer's own number for the source
    (`[n]`), when it numbers them; `span` where the citation stands in the message text, when known;
    `kind` is `url`, `file`, or `unresolved` (a `[n]` marker naming no logged source).
    """

    url: str
    title: str | None
    sentence: str
    number: int | None = None
    span: tuple[int, int] | None = None
    kind: Literal["url", "file", "unresolved"] = "url"
    file_id: str | None = None


def plain_title(value: Any) -> str | None:
    """A citation's title when it is one: a string that is not only a number (`"3"`, `"[3]"`)."""
    if not isinstance(value, str) or not value.strip() or _NUMERIC_TITLE.fullmatch(value):
        return None
    return value


def _abbreviation(text: str, period: int) -> bool:
    """True when the period at `period` closes an abbreviation (`U.S.`, `St.`, `e.g.`), not a sentence."""
    word = _WORD_BEFORE.search(text, max(0, period - 12), period + 1)
    if word is None:
        return False
    letter, before = word.group(1), word.start() - 1
    if len(letter) == 1 and letter.isalpha():  # `U.S.`, `e.g.`; an initial (`J. Smith`); not `330 m.`
        return (before >= 0 and text[before] == ".") or (letter.isupper() and (before < 0 or text[before] == " "))
    return letter.lower() in _ABBREVIATIONS


def sentence_ends(text: str) -> list[int]:
    """Positions just after each sentence end of `text`, citation markers that close it included.

    `.!?` end a sentence before white space or the end, and not after an abbreviation (`U.S.`,
    `e.g.`, an initial as in `J. Smith`, or a common one as in `St.`) unless a citation marker
    follows; the CJK ends end one anywhere.
    """
    return [m.end() for m in _SENTENCE_END.finditer(text)
            if not (text[m.start()] == "." and m.end() == m.start() + 1 and _abbreviation(text, m.start()))]


def cited_sentence(text: str, start: int, end: int, ends: Sequence[int] | None = None) -> str:
    """The claim a citation span supports.

    That is the sentence containing the span or, when the span is a link or marker (it opens with
    `(` or `[`, or it is empty: where a removed `file_citation` marker stood) right after a
    sentence (OpenAI puts `([site](url))` after the period), that sentence and the span; markers
    between the sentence and the span (`[1][2]`) are passed over. A span that covers text of its
    own is the sentences it touches. A period inside a number, a version or a URL does not end a
    sentence. `ends` is `sentence_ends(text)`, for a caller that asks about many spans of one text.
    """
    if not 0 <= start <= end <= len(text):
        return ""
    if ends is None:
        ends = sentence_ends(text)
    if start != end and not text.startswith(("(", "["), start):
        return _containing(text, start, end, ends)
    anchor = start
    markers: dict[int, int] | None = None  # end -> start of each run of markers, found when first needed
    while anchor > 0:
        if text[anchor - 1] in " \t":
            anchor -= 1
            continue
        if text[anchor - 1] not in "])":
            break
        markers = {m.end(): m.start() for m in MARKER_RUN.finditer(text)} if markers is None else markers
        if anchor not in markers:
            break
        anchor = markers[anchor]
    before_anchor = bisect.bisect_left(ends, anchor)
    if anchor > 0 and before_anchor < len(ends) and ends[before_anchor] == anchor:
        left = ends[before_anchor - 1] if before_anchor else 0
        return text[left:end].strip()
    return _containing(text, start, end, ends)


def _containing(text: str, start: int, end: int, ends: Sequence[int]) -> str:
    """The sentences of `text` that the span from `start` to `end` touches."""
    at_start = bisect.bisect_right(ends, start)
    left = ends[at_start - 1] if at_start else 0
    at_end = bisect.bisect_left(ends, end)
    right = ends[at_end] if at_end < len(ends) else len(text)
    return text[left:right].strip()


class _Text:
    """One output text with its sentence ends, computed once for all its citations."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ends = sentence_ends(text)
        self._runs = [m.span() for m in MARKER_RUN.finditer(text)] if "[" in text or "\u3010" in text else []
        self._starts = [start for start, _ in self._runs]

    def sentence(self, span: tuple[int, int] | None) -> str:
        return cited_sentence(self.text, span[0], span[1], self.ends) if span is not None else ""

    def run_of(self, start: int, end: int) -> tuple[int, int]:
        """The whole run of markers a marker belongs to, so `[1][2]` cite the same sentence."""
        at = bisect.bisect_right(self._starts, start) - 1
        if at >= 0 and end <= self._runs[at][1]:
            return self._runs[at]
        return start, end


def _span(ann: dict[str, Any], length: int) -> tuple[int, int] | None:
    """An annotation's (start, end), when it has one that lies inside a text of `length`."""
    start, end = ann.get("start_index"), ann.get("end_index")
    if isinstance(start, int) and isinstance(end, int) and not isinstance(start, bool) and 0 <= start <= end <= length:
        return start, end
    return None


def _located(text: _Text, url: str, taken: set[tuple[int, int]]) -> tuple[tuple[int, int] | None, int | None]:
    """Where an annotation without indices stands: its `[[n]](url)` marker or markdown link."""
    key = url_key(url)
    for pattern in (_XAI_MARKER, _MD_LINK):  # an xAI marker first: it carries the source's number
        for m in pattern.finditer(text.text):
            if url_key(m.group(2)) == key and m.span() not in taken:
                return m.span(), int(m.group(1)) if pattern is _XAI_MARKER else None
    return None, None


def _from_annotation(text: _Text, ann: dict[str, Any], taken: set[tuple[int, int]]) -> Citation | None:
    kind = ann.get("type")
    if kind == "file_citation" and (ann.get("file_id") or ann.get("filename")):
        index = ann.get("index")
        span = (index, index) if isinstance(index, int) and 0 <= index <= len(text.text) else None
        return Citation(url="", title=plain_title(ann.get("filename")), sentence=text.sentence(span), span=span,
                        kind="file", file_id=str(ann.get("file_id") or ""))
    if kind == "unresolved_citation":
        span = _span(ann, len(text.text))
        number = ann.get("number")
        return Citation(url="", title=None, sentence=text.sentence(span), span=span, kind="unresolved",
                        number=number if isinstance(number, int) else None)
    if kind != "url_citation" or not ann.get("url"):
        return None
    url = str(ann["url"])
    span = _span(ann, len(text.text))
    number = ann.get("number") if isinstance(ann.get("number"), int) else None
    if span is None:
        span, number = _located(text, url, taken) if number is None else (None, number)
    if span is not None:
        taken.add(span)
    sentence_span = text.run_of(*span) if span is not None else None
    return Citation(url=url, title=plain_title(ann.get("title")), sentence=text.sentence(sentence_span),
                    number=number, span=span)


def _overlaps(span: tuple[int, int], taken: set[tuple[int, int]]) -> bool:
    return any(start < span[1] and span[0] < end for start, end in taken)


def _inline(text: _Text, taken: set[tuple[int, int]], covered: set[str]) -> list[Citation]:
    """`[[n]](url)` markers and markdown links that no annotation stands for."""
    found: list[Citation] = []
    for m in _XAI_MARKER.finditer(text.text):
        if not _overlaps(m.span(), taken) and url_key(m.group(2)) not in covered:
            taken.add(m.span())
            found.append(Citation(url=m.group(2), title=None, sentence=text.sentence(text.run_of(*m.span())),
                                  number=int(m.group(1)), span=m.span()))
    for m in _MD_LINK.finditer(text.text):
        if not _overlaps(m.span(), taken):
            found.append(Citation(url=m.group(2), title=plain_title(m.group(1)), sentence=text.sentence(m.span()),
                                  span=m.span()))
    return found


def _bare_markers(text: _Text, unplaced: list[Citation], taken: set[tuple[int, int]]) -> list[Citation]:
    """`[n]` markers of a text whose annotations carry no place (other OpenAI-compatible backends).

    The annotations' distinct URLs, in order, are then the numbered sources: `[n]` cites the n-th.
    A marker beyond them is unresolved.
    """
    urls = list(dict.fromkeys(c.url for c in unplaced))
    titles = {c.url: c.title for c in unplaced}
    found: list[Citation] = []
    for m in _BARE_MARKER.finditer(text.text):
        if _overlaps(m.span(), taken):
            continue
        number = int(m.group(1) or m.group(2))
        sentence = text.sentence(text.run_of(*m.span()))
        if 1 <= number <= len(urls):
            url = urls[number - 1]
            found.append(Citation(url=url, title=titles[url], sentence=sentence, number=number, span=m.span()))
        else:
            found.append(Citation(url="", title=None, sentence=sentence, number=number, span=m.span(),
                                  kind="unresolved"))
    return found


def message_citations(item: dict[str, Any]) -> list[Citation]:
    """Every citation of a message item, in order of its annotations, then inline ones.

    A message logged as plain text (`{"role": "assistant", "content": "…"}`) is read for its inline
    markers and links too.
    """
    content = item.get("content")
    parts = [{"text": content}] if isinstance(content, str) else content if isinstance(content, list) else []
    found: list[Citation] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        text = _Text(str(part.get("text") or ""))
        taken: set[tuple[int, int]] = set()
        anns = [a for a in part.get("annotations") or [] if isinstance(a, dict)]
        own = [c for c in (_from_annotation(text, a, taken) for a in anns) if c is not None]
        unplaced = [c for c in own if c.kind == "url" and c.span is None]
        found.extend(own)
        found.extend(_inline(text, taken, {url_key(c.url) for c in unplaced}))
        if unplaced and not any(c.number is not None for c in own):
            found.extend(_bare_markers(text, unplaced, taken))
    return found
