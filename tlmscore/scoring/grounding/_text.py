"""Text analysis for the grounding scorer: sentences, word stems, numbers, names, dates, negation.

Deliberately simple and deterministic (regular expressions and small word lists, no model): the
same text gives the same analysis in every process. What matters for grounding is which content
words a sentence uses and which facts must agree exactly with the evidence — numbers, dates and
names — and whether it is negated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from tlmscore.scoring.grounding._tokens import Token, normalise, stem, tokens


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _word_set("""
a about above across after afterwards again against all almost alone along already also although always am
among an and another any anyhow anyone anything anyway anywhere are around as at be became because become
becomes been before being below beside besides between both but by can could did do does doing done down due
during each either else elsewhere enough etc even ever every everyone everything everywhere few for from
further get gets getting give given gives go goes going got had has have having he hence her here hers herself
him himself his how however i ie if in indeed instead into is it its itself just keep kept let like likely
made make makes many may me meanwhile might mine more moreover most mostly much must my myself namely near
need needs nevertheless next now of off often on once one only onto or other others otherwise our ours
ourselves out over own per perhaps please put quite rather really same say says see seem seemed seems several
shall she should since so some somehow someone something sometime sometimes somewhere still such than that the
their theirs them themselves then there thereby therefore these they this those though through throughout thus
to together too toward towards under until up upon us usual usually very via was we well were what whatever
when whenever where whereas wherever whether which while who whoever whole whom whose why will with within
would yes yet you your yours yourself yourselves
""")
# "not" in English and, written as words, in other languages (normalised as `analyse` sees them).
NEGATIONS = frozenset(normalise(w) for w in _word_set("""
not no never none nothing nobody neither nor cannot nowhere
nicht kein keine keinen keiner nie niemals pas jamais aucun aucune nunca ningún ninguna não nem nenhum
non niet geen nooit inte aldrig ikke не нет никогда нельзя δεν μην لا ليس ليست لم لن नहीं कभी לא אין
"""))
_OPPOSITE_PAIRS = (
    ("increase", "decrease"), ("rise", "fall"), ("rose", "fell"), ("grow", "shrink"), ("grew", "shrank"),
    ("fewer", "more"), ("higher", "lower"), ("win", "lose"),
    ("won", "lost"), ("accept", "reject"), ("agree", "disagree"), ("positive", "negative"), ("larger", "smaller"),
    ("largest", "smallest"), ("best", "worst"), ("early", "late"), ("earlier", "later"), ("first", "last"),
    ("maximum", "minimum"), ("open", "closed"), ("strong", "weak"), ("gain", "loss"), ("profit", "loss"),
    ("success", "failure"), ("succeed", "fail"), ("allow", "forbid"), ("include", "exclude"), ("buy", "sell"),
    ("import", "export"), ("start", "end"), ("above", "below"), ("inside", "outside"), ("easy", "difficult"),
    ("cheap", "expensive"), ("happy", "sad"), ("love", "hate"), ("true", "false"), ("legal", "illegal"),
    ("possible", "impossible"), ("likely", "unlikely"), ("able", "unable"), ("available", "unavailable"),
    ("support", "oppose"), ("approve", "reject"), ("expand", "shrink"), ("add", "remove"), ("arrive", "depart"),
    ("remember", "forget"), ("same", "different"), ("hot", "cold"), ("young", "old"), ("new", "old"),
    ("present", "absent"), ("male", "female"), ("morning", "evening"), ("north", "south"), ("east", "west"),
)


def _opposites() -> Mapping[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for x, y in _OPPOSITE_PAIRS:
        found.setdefault(stem(x), set()).add(stem(y))
        found.setdefault(stem(y), set()).add(stem(x))
    return MappingProxyType({k: frozenset(v) for k, v in found.items()})


# Common English opposites, as stems: a claim word whose opposite its passage uses instead contradicts it.
OPPOSITES = _opposites()
# "Not" in scripts without spaces, found inside their bigrams.
_NEGATION_CHARS = frozenset("不没沒无無않못없")
_NEGATION_GRAMS = frozenset(("ない", "ませ", "せん", "なか", "ずに"))
MONTHS: Mapping[str, str] = MappingProxyType({
    "january": "january", "jan": "january", "february": "february", "feb": "february", "march": "march",
    "april": "april", "apr": "april", "may": "may", "june": "june", "jun": "june", "july": "july",
    "jul": "july", "august": "august", "aug": "august", "september": "september", "sep": "september",
    "sept": "september", "october": "october", "oct": "october", "november": "november", "nov": "november",
    "december": "december", "dec": "december",
})
_WEEKDAYS = _word_set("monday tuesday wednesday thursday friday saturday sunday")
_NUMBER_WORDS: Mapping[str, str] = MappingProxyType({
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
    "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13", "fourteen": "14", "fifteen": "15",
    "sixteen": "16", "seventeen": "17", "eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30",
    "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
})
_MONTH_NAMES = tuple(dict.fromkeys(MONTHS.values()))  # january to december, in order
_SHORTEST_WORD = 2
_ABBREVIATIONS = _word_set("e.g i.e etc vs mr mrs ms dr st no approx ca fig inc ltd co jr sr u.s")

_BOUNDARY = re.compile(r"[.!?]+[\"\u201d\u2019)\]]*\s+"
                       r"|[\u3002\uff01\uff1f\u0964\u061f\u06d4]+[\u300d\u300f\uff09)\"\u201d]*\s*")
CITATION_MARKER = re.compile(
    r"\[\[\d+\]\]\([^)\s]*\)"                                   # xAI: [[1]](https://…)
    r"|\u3010[^\u3011\n]{0,80}\u3011"                                # 【1†source】, 【4:0†file.pdf】
    r"|\[\^?\d{1,3}(?:\s*[,\u2013-]\s*\^?\d{1,3})*\]"                # [1], [1, 2], [1-3], [^1]
    r"|\(\s*\[[^\]]*\]\((?:https?://)[^)\s]*\)\s*\)")                # ([example.com](https://…))
_LONGEST_RANGE = 20
_MARKER_NUMBER = re.compile(r"\d+(?:\s*[\u2013-]\s*\d+)?")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})"
                       r"(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?!\d)")
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
# A markdown link of any target (`https://…`, `sandbox:/mnt/data/…`, `mailto:…`, a relative path).
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
# A URL written out: a web address, or one of the schemes answers name files and mail with.
_BARE_URL = re.compile(r"\b(?:https?|ftp|file|sandbox)://?\S+|\bmailto:\S+|\bwww\.[\w-]+\.\S+")
# A quoted label or value (`"TOTAL: 70024"`): a clause never ends inside one.
_QUOTED = re.compile(r"\"[^\"\n]{1,120}\"|\u201c[^\u201d\n]{1,120}\u201d|`[^`\n]{1,120}`")
_DOMAIN_LABEL = re.compile(r"^[\w.-]+\.[a-z]{2,}$|^\d+$", re.IGNORECASE)
_LIST_MARKER = re.compile(r"^\s*(?:[-*+•>]+|\d+[.)]|#{1,6})\s+")
_CLAUSE = re.compile(r";|:(?!\d)|,(?!\d)|[\uff0c\u3001\uff1b\uff1a\u060c\u061b]|"
                     r"\s[-\u2013\u2014]\s|\b(?:but|whereas|while|although|though|however|except)\b",
                     re.IGNORECASE)
_NOT_NEGATION = re.compile(
    r"\b(?:no|not)\s+(?:more|less|fewer|later|earlier|sooner|greater|higher|lower|longer)\s+than\b|\bnot\s+only\b",
    re.IGNORECASE)


def clean_markdown(text: str) -> str:
    """Text without link targets, emphasis, code ticks and list or heading markers.

    Citation markers of every style (`[1]`, `[1][2]`, `[[1]](https://…)`, `【1†source】`,
    `([example.com](https://…))`) and links whose label is a domain or a number are removed
    entirely; any other link keeps its label.
    """
    text = CITATION_MARKER.sub(" ", text)
    text = _LINK.sub(lambda m: "" if _DOMAIN_LABEL.match(m.group(1).strip()) else m.group(1), text)
    text = _BARE_URL.sub(" ", text)
    text = _LIST_MARKER.sub("", text)
    text = re.sub(r"`|\*{1,3}|(?<!\w)_{1,3}|_{1,3}(?!\w)", "", text)
    return text.strip()


def _is_boundary(line: str, match: re.Match[str]) -> bool:
    before = line[:match.start()].rsplit(None, 1)
    word = re.split(r"[/(\[\"'\u201c]", before[-1].lower())[-1] if before else ""  # "FRED/St." → "st."
    if word.rstrip(".") in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
        return False
    following = line[match.end():match.end() + 1]
    return not following.islower()


def sentences(text: str) -> list[str]:
    """The sentences of `text`, split at line breaks and at sentence-ending punctuation.

    Paragraphs, list items and headings each stand alone. Abbreviations (`e.g.`, `Dr.`), initials
    and decimals do not end a sentence, nor does a full stop followed by a lower-case word.
    """
    found: list[str] = []
    for line in filter(None, (ln.strip() for ln in text.splitlines())):
        start = 0
        for match in _BOUNDARY.finditer(line):
            if _is_boundary(line, match):
                found.append(line[start:match.end()].strip())
                start = match.end()
        if line[start:].strip():
            found.append(line[start:].strip())
    return found


def marker_numbers(marker: str) -> tuple[int, ...]:
    """The source numbers a citation marker names: `[1, 3-4]` → (1, 3, 4); none for a link."""
    if "](" in marker and not marker.startswith("[["):
        return ()
    found: list[int] = []
    for m in _MARKER_NUMBER.finditer(marker.split("\u2020", 1)[0].split(":", 1)[0]):
        ends = [int(n) for n in re.findall(r"\d+", m.group(0))]
        found += range(ends[0], min(ends[-1], ends[0] + _LONGEST_RANGE) + 1)
    return tuple(dict.fromkeys(found))


def _number(token: str) -> str | None:
    """The canonical form of a numeric token (`10,000` → `10000`, `1.50` → `1.5`, `25th` → `25`)."""
    ordinal = _ORDINAL.match(token)
    if ordinal:
        token = ordinal.group(1)
    if _THOUSANDS.match(token):
        token = token.replace(",", "")
    if not re.fullmatch(r"\d+(?:\.\d+)?", token):
        return None
    if "." in token:
        token = token.rstrip("0").rstrip(".")
    return token.lstrip("0") or "0"


def expand_dates(text: str) -> str:
    """ISO dates and times written as people write them, so both forms match.

    `2026-02-03T13:05:00+01:00` becomes `3 February 2026, 13:05`; the time zone is dropped.
    """
    def spell(m: re.Match[str]) -> str:
        month = int(m.group(2))
        if not 1 <= month <= len(_MONTH_NAMES):
            return m.group(0)
        date = f"{int(m.group(3))} {_MONTH_NAMES[month - 1].capitalize()} {m.group(1)}"
        return f"{date}, {m.group(4)}:{m.group(5)}" if m.group(4) else date
    return _ISO_DATE.sub(spell, text)


def _says_not(token: Token) -> bool:
    if token.kind == "gram":
        return token.text in _NEGATION_GRAMS or any(c in _NEGATION_CHARS for c in token.text)
    lower = token.text.lower()
    return lower in NEGATIONS or lower.endswith("n't")


def is_negated(text: str) -> bool:
    """Whether `text` says "not": a negation word or an n't contraction, but not "no more than"."""
    plain = _NOT_NEGATION.sub(" ", normalise(text).replace("\u2019", "'"))
    return any(_says_not(t) for t in tokens(plain))


@dataclass(frozen=True)
class Analysis:
    """What the grounding scorer needs of one piece of text.

    `words`: every word stem, stop words included (for matching names); `content`: stems of the
    content words, in order of first use; `numbers`: canonical numbers; `names`: stems of words that
    must be matched exactly (names, months, weekdays, codes such as `L2`); `clauses`: the content
    stems of each clause with whether it says "not", so polarity is compared clause by clause;
    `initials`: stems of capitalised content words where a capital proves nothing (the start of a
    sentence), which are names when the evidence always capitalises them; `lowered`: stems of the
    words written in lower case.
    """

    words: frozenset[str]
    content: tuple[str, ...]
    numbers: tuple[str, ...]
    names: tuple[str, ...]
    clauses: tuple[tuple[frozenset[str], bool], ...] = ()
    initials: tuple[str, ...] = ()
    lowered: frozenset[str] = frozenset()


def _initial_positions(text: str) -> set[int]:
    """Offsets of tokens that start the text or follow a colon, semicolon or quote: capitals there prove nothing."""
    return {0, *(m.end() for m in re.finditer(r"[:;\"“(]\s*", text))}


def _kind(token: Token, initial: set[int]) -> tuple[str, str]:
    """Classify one token: ("number" | "name" | "content" | "stop", normalised form)."""
    raw = token.text
    if token.kind == "gram":
        return "content", raw
    lower = raw.lower()
    number = _number(raw) if raw[0].isdigit() else _NUMBER_WORDS.get(lower)
    if number is not None:
        return "number", number
    if lower in MONTHS and (lower != "may" or raw[0].isupper()):
        return "name", MONTHS[lower]
    if lower in _WEEKDAYS:
        return "name", lower
    return _word_kind(raw, lower, token.start not in initial), stem(raw)


def _word_kind(raw: str, lower: str, mid_sentence: bool) -> str:
    """A word's kind: a name (capitalised mid-sentence, an acronym, or with digits), a stop word, or content."""
    head = re.split(r"['\u2019]", lower, maxsplit=1)[0]
    if head != lower and (head in STOPWORDS or lower.endswith(("n't", "n\u2019t"))):
        return "stop"
    acronym = len(raw) > 1 and raw.isupper()
    capitalised = len(raw) > 1 and raw[0].isupper() and mid_sentence and lower not in STOPWORDS
    if any(c.isdigit() for c in raw) or acronym or capitalised:
        return "name"
    if lower in STOPWORDS or lower in NEGATIONS or len(lower) < _SHORTEST_WORD:
        return "stop"
    return "content"


def clauses(text: str) -> list[str]:
    """The clauses of a sentence.

    Split at semicolons, colons, commas between words, dashes and contrasting conjunctions (but,
    while, although, …), except inside a quoted label or value, a link or a URL (`"TOTAL: 70024"`,
    `[file](sandbox:/mnt/…)`): those are one thing said, not clauses.
    """
    kept = [m.span() for pattern in (_QUOTED, _LINK, _BARE_URL) for m in pattern.finditer(text)]
    found: list[str] = []
    start = 0
    for m in _CLAUSE.finditer(text):
        if not any(a <= m.start() < b for a, b in kept):
            found.append(text[start:m.start()])
            start = m.end()
    found.append(text[start:])
    return [part.strip() for part in found if part.strip()]


def _clauses(text: str) -> tuple[tuple[frozenset[str], bool], ...]:
    found = []
    for part in _CLAUSE.split(_NOT_NEGATION.sub(" ", text)):
        words = frozenset(t.text if t.kind == "gram" else stem(t.text) for t in tokens(part)
                          if not t.text[0].isdigit() and not _says_not(t) and t.text.lower() not in STOPWORDS)
        if words:
            found.append((words, is_negated(part)))
    return tuple(found)


def analyse(text: str) -> Analysis:
    """Tokenise and classify `text` (already cleaned of markdown)."""
    text = expand_dates(normalise(text)).replace("%", " percent ")  # "5%" and "5 percent" alike
    initial = _initial_positions(text)
    words: list[str] = []
    kinds: dict[str, dict[str, None]] = {"content": {}, "number": {}, "name": {}, "initial": {}}
    lowered: set[str] = set()
    for token in tokens(text):
        kind, form = _kind(token, initial)
        if kind == "number":
            kinds["number"][form] = None
            continue
        words.append(form)
        if token.text.islower():
            lowered.add(form)
        elif kind == "content" and token.start in initial and token.text[0].isupper():
            kinds["initial"][form] = None
        if kind == "name":
            kinds["name"][form] = None
            kinds["content"][form] = None
        elif kind == "content":
            kinds["content"][form] = None
    return Analysis(words=frozenset(words), content=tuple(kinds["content"]), numbers=tuple(kinds["number"]),
                    names=tuple(kinds["name"]), clauses=_clauses(text), initials=tuple(kinds["initial"]),
                    lowered=frozenset(lowered))


def analysed_sentences(text: str, analyser: Callable[[str], Analysis] = analyse) -> tuple[Analysis, ...]:
    """A document's sentences, each cleaned of markdown and analysed."""
    return tuple(analyser(clean_markdown(s)) for s in sentences(text))
