"""The grounding rules that are options: each changes what it says it changes, and only that."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from tlmscore.model import Evidence, ScoringInput
from tlmscore.scoring import Score
from tlmscore.scoring.grounding import GroundingOptions, GroundingScorer
from tlmscore.scoring.grounding._lexicon import Lexicon
from tlmscore.scoring.grounding._scorer import _chosen
from tlmscore.scoring.grounding._signals import FEATURES
from tlmscore.scoring.grounding._tokens import stem


def score(response: str, evidence: str, **options: Any) -> Score:
    item = ScoringInput("q", response, evidence=(Evidence(kind="tool", text=evidence, call_id="c", tool="read"),))
    return GroundingScorer(GroundingOptions(lexicon=False, **options)).score_one(item)


def test_together_off_lets_words_held_apart_support_their_pairing() -> None:
    evidence = "The board rejected the merger plan in March. The union accepted the wage offer after a long vote."
    on = score("The board accepted the merger plan.", evidence)
    off = score("The board accepted the merger plan.", evidence, together=False)
    assert on.score < off.score
    faithful = "The board rejected the merger plan."
    assert score(faithful, evidence).score == score(faithful, evidence, together=False).score == 1.0


def test_polarity_closest_reads_only_the_clauses_sharing_the_most_words() -> None:
    evidence = ("The committee did not approve the new budget plan for the harbour. "
                "Later the committee approved the budget.")
    claim = "The committee approved the new budget plan for the harbour."
    every = score(claim, evidence)
    closest = score(claim, evidence, polarity="closest")
    assert "negation differs" not in str(every.details)
    assert "negation differs" in str(closest.details) and closest.score < every.score


def test_stop_word_opposites_off_checks_content_words_only() -> None:
    evidence = "This year the laboratory hired fewer engineers than it did in the previous year."
    claim = "The laboratory hired more engineers than in the previous year."
    on = score(claim, evidence)
    off = score(claim, evidence, stop_opposites=False)
    assert on.score < 0.5 <= off.score
    increase = score("Sales decreased sharply this spring.", "Sales increased sharply this spring.",
                     stop_opposites=False)
    assert increase.score < 0.5  # a content word's opposite still counts


def test_synonyms_and_antonyms_can_be_chosen_apart() -> None:
    members = MappingProxyType({"k": frozenset({stem("buy"), stem("purchase")})})
    senses = MappingProxyType({stem("buy"): frozenset({"k"}), stem("purchase"): frozenset({"k"})})
    antonyms = MappingProxyType({stem("buy"): frozenset({stem("sell")}), stem("sell"): frozenset({stem("buy")})})
    lexicon = Lexicon(senses, members, antonyms, "test")
    synonyms_only = _chosen(lexicon, GroundingOptions(antonyms=False))
    antonyms_only = _chosen(lexicon, GroundingOptions(synonyms=False))
    assert synonyms_only.forms(stem("buy")) == {stem("buy"), stem("purchase")}
    assert synonyms_only.opposites(stem("buy")) == frozenset()
    assert antonyms_only.forms(stem("buy")) == {stem("buy")}
    assert antonyms_only.opposites(stem("buy")) == {stem("sell")}
    assert _chosen(lexicon, GroundingOptions()) is lexicon


# ---------------------------------------------------------------- the signals a fit reads


def test_details_carry_the_signals_a_fit_reads() -> None:
    found = score("The board rejected the merger plan in 2019.", "The board rejected the merger plan in March.")
    signals = found.details["signals"]
    assert list(signals) == list(FEATURES)
    assert signals["number_missing"] == 1.0 and signals["min_lexical"] == 1.0 and signals["supported"] == 0.0
