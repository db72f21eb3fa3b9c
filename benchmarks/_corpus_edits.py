"""A labelled set built from public articles: extractive summaries, kept or edited to say something else.

Source: the human-annotated article bodies of the shared corpus's `pages/ground-truth.json` (the
article-extraction benchmark's pages). For each article, three sentences spread over it form a
summary, shortened by dropping a trailing clause where the rest still has something to say.

- consistent (label 1): that summary, and the same with its sentences in another order;
- inconsistent (label 0): that summary with one edit in one sentence — a number changed, a name
  swapped for another name of the same article, a "not" added, a word swapped for its opposite,
  or a content word swapped for another word of the article.

The edits are made with a seeded generator, so the set is the same on every run. It is the set the
grounding scorer's choices were checked on (with `fixtures/labelled`); SummEdits only measures.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import CORPUS_PAGES

# The grounding scorer's own sentence split, a private module: the set is defined by the sentences the scorer
# sees (its summaries are three of them), so another splitter would make another set and change every figure
# measured on it. tlmscore exports no sentence splitter.
from tlmscore.scoring.grounding._text import sentences

GROUND_TRUTH = CORPUS_PAGES / "ground-truth.json"
_SEED = 14
_SHORTEST, _LONGEST, _KEEP = 10, 45, 6
_OPPOSITES = dict(pair for a, b in (
    ("increase", "decrease"), ("increased", "decreased"), ("more", "less"), ("higher", "lower"),
    ("before", "after"), ("first", "last"), ("won", "lost"), ("rise", "fall"), ("rose", "fell"),
    ("larger", "smaller"), ("best", "worst"), ("early", "late"), ("new", "old"), ("many", "few"),
    ("most", "least"), ("always", "never"), ("open", "closed"), ("strong", "weak"), ("gained", "lost"),
    ("up", "down"), ("large", "small"), ("long", "short"), ("easy", "hard"), ("public", "private"),
) for pair in ((a, b), (b, a)))
_AUXILIARY = re.compile(r"\b(is|was|are|were|has|have|had|can|will|would|could|should|did|does)\b")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_NAME = re.compile(r"(?<=[a-z,] )[A-Z][a-z]{2,}\b")
_WORD = re.compile(r"\b[a-z]{6,}\b")


def _shorten(sentence: str) -> str:
    """The sentence without its last clause, when what is left still has `_KEEP` words."""
    head = sentence.rsplit(",", 1)[0]
    return head.rstrip(" ,;") + "." if head != sentence and len(head.split()) >= _KEEP else sentence


def _change_number(text: str, _doc: str, rng: random.Random) -> str | None:
    found = list(_NUMBER.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    value = m.group(0).replace(",", "")
    changed = str(int(float(value)) + rng.choice((1, 2, 3, 10))) if "." not in value else f"{float(value) * 2:g}"
    return text[:m.start()] + changed + text[m.end():]


def _swap(pattern: re.Pattern[str], text: str, doc: str, rng: random.Random) -> str | None:
    """`text` with one of its matches of `pattern` replaced by one from `doc` that `text` lacks."""
    mine = set(pattern.findall(text))
    others = sorted(set(pattern.findall(doc)) - mine)
    if not mine or not others:
        return None
    old = rng.choice(sorted(mine))
    return re.sub(rf"\b{old}\b", rng.choice(others), text, count=1)


def _swap_name(text: str, doc: str, rng: random.Random) -> str | None:
    return _swap(_NAME, text, doc, rng)


def _negate(text: str, _doc: str, rng: random.Random) -> str | None:
    found = [m for m in _AUXILIARY.finditer(text) if not text[m.end():].lstrip().startswith("not")]
    if not found:
        return None
    m = rng.choice(found)
    return text[:m.end()] + " not" + text[m.end():]


def _opposite(text: str, _doc: str, rng: random.Random) -> str | None:
    found = [m for m in re.finditer(r"\b[a-z]+\b", text) if m.group(0) in _OPPOSITES]
    if not found:
        return None
    m = rng.choice(found)
    return text[:m.start()] + _OPPOSITES[m.group(0)] + text[m.end():]


def _swap_word(text: str, doc: str, rng: random.Random) -> str | None:
    return _swap(_WORD, text, doc, rng)


EDITS: dict[str, Callable[[str, str, random.Random], str | None]] = {
    "number": _change_number, "name": _swap_name, "negation": _negate, "opposite": _opposite, "word": _swap_word,
}


def _summary(doc: str) -> list[str] | None:
    """Three shortened sentences spread over the document, or None when it has too few."""
    usable = [s for s in sentences(doc) if _SHORTEST <= len(s.split()) <= _LONGEST]
    if len(usable) < 3:
        return None
    picks = [usable[len(usable) * k // 4] for k in (1, 2, 3)]
    return [_shorten(s) for s in picks]


def _variants(doc: str, rng: random.Random) -> Iterator[tuple[str, int, str]]:
    """(summary, label, kind) for one document."""
    summary = _summary(doc)
    if summary is None:
        return
    yield " ".join(summary), 1, "kept"
    yield " ".join([summary[2], summary[0], summary[1]]), 1, "reordered"
    kinds = list(EDITS)
    rng.shuffle(kinds)
    made = 0
    for kind in kinds:
        where = rng.randrange(3)
        edited = EDITS[kind](summary[where], doc, rng)
        if edited is None or edited == summary[where]:
            continue
        yield " ".join([*summary[:where], edited, *summary[where + 1:]]), 0, kind
        made += 1
        if made == 2:
            return


def rows(path: Path = GROUND_TRUTH) -> list[dict[str, Any]]:
    """The set: `doc`, `summary`, `label`, `kind` per row, in a fixed order."""
    found: list[dict[str, Any]] = []
    truth = json.loads(path.read_text(encoding="utf-8"))
    for key in sorted(truth):
        doc = str(truth[key].get("articleBody") or "")
        rng = random.Random(f"{_SEED}:{key}")
        found += [{"doc": doc, "summary": text, "label": label, "kind": kind}
                  for text, label, kind in _variants(doc, rng)]
    return found
