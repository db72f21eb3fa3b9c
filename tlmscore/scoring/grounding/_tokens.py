"""Words of any script for the grounding scorer: normalisation, tokens and symmetric stems.

- Normalisation: NFKC (full-width forms, ligatures), combining marks dropped (Arabic harakat,
  Hebrew points, accents written as separate marks), the Arabic tatweel dropped and every decimal
  digit written as an ASCII digit, so Arabic-Indic and full-width digits read as `2024`.
- Tokens: numbers (`10,000`, `3.5`), dotted abbreviations as one word (`U.K.` → `UK`), words of
  scripts that separate words with spaces (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, …),
  and for scripts that do not (Chinese, Japanese, Korean, Thai, Lao, Khmer, Myanmar) overlapping
  character bigrams of each run, so a sentence and a paraphrase of it share most of their units
  with no dictionary or segmenter.
- Stems: the Snowball stemmer of the word's script (PyStemmer: English for Latin script, Russian,
  Greek, Arabic, Hindi, Tamil, Armenian), the same on both sides, so `uses` and `used` meet at `use`.
  Other scripts are lower-cased only.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from typing import NamedTuple

import Stemmer

_UNSPACED = ("\u3040-\u30ff\u3100-\u312f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
             "\uac00-\ud7af\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff")
_TOKEN = re.compile(rf"(\d+(?:[.,]\d+)+)|([{_UNSPACED}]+)|((?:[A-Za-z]\.){{2,}})"
                    rf"|([^\W_{_UNSPACED}]+(?:['\u2019][^\W\d_{_UNSPACED}]+)?)")
_DIGIT = re.compile(r"[^\x00-\x7f]")
_TATWEEL = "\u0640"
_STEM_CACHE = 65_536
# Blocks whose words a Snowball stemmer reads: (first, last code point, stemmer).
_SCRIPTS = ((0x0030, 0x024F, "english"), (0x1E00, 0x1EFF, "english"), (0x0370, 0x03FF, "greek"),
            (0x0400, 0x052F, "russian"), (0x0530, 0x058F, "armenian"), (0x0600, 0x06FF, "arabic"),
            (0x0750, 0x077F, "arabic"), (0x0900, 0x097F, "hindi"), (0x0B80, 0x0BFF, "tamil"))


class Token(NamedTuple):
    """One token: its text, offset in the normalised text, and kind (`number`, `word` or `gram`)."""

    text: str
    start: int
    kind: str


def normalise(text: str) -> str:
    """`text` in NFKC without combining marks or tatweel, with ASCII digits."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return text
    text = "".join(c for c in text if c != _TATWEEL and unicodedata.category(c) != "Mn")
    return _DIGIT.sub(lambda m: str(unicodedata.decimal(m.group(), "")) or m.group(), text)


def tokens(text: str) -> list[Token]:
    """The tokens of normalised `text`: numbers, words, and bigrams of runs in unspaced scripts."""
    found: list[Token] = []
    for m in _TOKEN.finditer(text):
        if m.group(3):
            found.append(Token(m.group(3).replace(".", ""), m.start(), "word"))  # U.K. → UK
            continue
        if m.group(2) is None:
            found.append(Token(m.group(0), m.start(), "number" if m.group(1) else "word"))
            continue
        run = m.group(2)
        if len(run) == 1:
            found.append(Token(run, m.start(), "gram"))
        found += [Token(run[i:i + 2], m.start() + i, "gram") for i in range(len(run) - 1)]
    return found


def _language(word: str) -> str | None:
    """The Snowball stemmer for the script of `word`'s first letter, or None."""
    point = ord(word[0])
    return next((name for first, last, name in _SCRIPTS if first <= point <= last), None)


class _Stemmers(threading.local):
    """One set of stemmers per thread: a PyStemmer object must not be shared between threads."""

    def __init__(self) -> None:
        self.by_language: dict[str, Stemmer.Stemmer] = {}

    def get(self, language: str) -> Stemmer.Stemmer:
        found = self.by_language.get(language)
        if found is None:
            found = self.by_language[language] = Stemmer.Stemmer(language)
        return found


_STEMMERS = _Stemmers()  # stateless for callers: a stem depends on the word alone


@functools.lru_cache(maxsize=_STEM_CACHE)
def stem(word: str) -> str:
    """The stem of `word`, lower-cased: the same for `launched`, `launches`, `launching`."""
    lower = word.lower().replace("\u2019", "'")
    if lower.endswith("'s"):
        lower = lower[:-2]
    language = _language(lower) if lower else None
    return str(_STEMMERS.get(language).stemWord(lower)) if language else lower
