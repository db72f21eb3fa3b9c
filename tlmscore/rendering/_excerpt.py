"""Cut page text to a budget, keeping the passages the answer cited before the rest.

Pure and deterministic: the same text, limit and focus give the same excerpt. A page cited by
many records of a batch is cut many times with different focus, so its split into units and
their words are remembered for the most recently cut texts.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

GAP = "\n\n[…]\n\n"
_WORD = re.compile(r"\w{3,}", re.UNICODE)
# Scripts written without spaces between words (Han, kana, Hangul, Thai): matched by character pairs.
_UNSPACED = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_SENTENCE = re.compile(r"(?<=[.!?\u061f\u0964])\s+|(?<=[\u3002\uff01\uff1f\uff0e])")
_MARKER = re.compile(r"\[\[\d+\]\]\([^)\s]*\)|\[\d+\]|\u3010\d+\u3011")


def text_words(text: str) -> frozenset[str]:
    """The words of `text`: words of three letters or more, and character pairs of unspaced scripts."""
    if text.isascii():  # the same words, found in one pass: no unspaced script, and lower case maps letters to letters
        return frozenset(_WORD.findall(text.lower()))
    words = {w.lower() for w in _WORD.findall(_UNSPACED.sub(" ", text))}
    for run in _UNSPACED.findall(text):
        words.update(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    return frozenset(words)


def _units(text: str, limit: int) -> list[str]:
    """Paragraphs, with any paragraph longer than a quarter of the limit split into sentences."""
    units: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        if not para.strip():
            continue
        if len(para) > max(limit // 4, 1):
            units.extend(s for s in _SENTENCE.split(para) if s.strip())
        else:
            units.append(para)
    return units


@functools.lru_cache(maxsize=64)
def _profile(text: str, limit: int) -> tuple[tuple[str, ...], tuple[tuple[frozenset[str], float], ...]]:
    """The units of `text` for `limit`, each unit's words with the length penalty of its score."""
    units = tuple(_units(text, limit))
    words = tuple((w, 1 + len(w) ** 0.5) for w in map(text_words, units))
    return units, words


def _trim(text: str, limit: int) -> str:
    """`text` cut to `limit` characters at a word boundary where one is near."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > limit * 0.8 else cut


def excerpt(text: str, limit: int, focus: Sequence[str] = ()) -> str:
    """At most `limit` characters of `text`: units overlapping `focus` first, then the rest in order.

    Chosen units are shown in document order; `[…]` marks what was left out.
    """
    if len(text) <= limit:
        return text
    units, profile = _profile(text, limit)
    wanted = frozenset().union(*(text_words(_MARKER.sub(" ", f)) for f in focus)) if focus else frozenset()
    scores = [len(w & wanted) / penalty if wanted else 0.0 for w, penalty in profile]
    by_relevance = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
    chosen: set[int] = set()
    used = 0
    for i in [*by_relevance, *range(len(units))]:
        if i in chosen:
            continue
        cost = len(units[i]) + len(GAP)
        if used + cost > limit:
            if not chosen:
                return _trim(units[i], limit)
            continue
        chosen.add(i)
        used += cost
    return _trim(_join(units, sorted(chosen)), limit)


def _join(units: Sequence[str], picked: list[int]) -> str:
    out: list[str] = []
    previous = -1
    for i in picked:
        if out:
            out.append(GAP if i != previous + 1 else "\n\n")
        elif i > 0:
            out.append("[…]\n\n")
        out.append(units[i])
        previous = i
    if picked and picked[-1] != len(units) - 1:
        out.append("\n\n[…]")
    return "".join(out)


def allocate(lengths: Sequence[int], per_item: int, total: int) -> list[int]:
    """Character budgets for pages of `lengths`: each at most `per_item`, together at most `total`.

    Short pages keep all their text; what they leave over is shared evenly by the longer ones.
    """
    wants = [min(n, per_item) for n in lengths]
    if sum(wants) <= total:
        return wants
    budgets = [0] * len(wants)
    remaining = total
    order = sorted(range(len(wants)), key=lambda i: (wants[i], i))
    for position, i in enumerate(order):
        share = remaining // (len(order) - position)
        budgets[i] = min(wants[i], share)
        remaining -= budgets[i]
    return budgets
