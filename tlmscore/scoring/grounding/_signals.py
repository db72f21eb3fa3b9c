"""The signals an answer's grounding score is made of, as numbers a fitted combination can read.

The hand-set rules multiply each claim's lexical support by penalties and take 0.3 of the mean and
0.7 of the minimum over claims. `features` lists what went into that: the claim supports (mean,
minimum), lexical share, `together`, the shares of claims with a number, a name, an opposite or
"not" that did not match, of partly supported claims, of claims their cited source does not
support, and of claims supported at all. The scorer reports them in `details["signals"]`;
`benchmarks/fit_grounding.py` fits a logistic regression on them across the development sets
(docs/validity.md: it did not beat the rules on the set it was not fitted on, so the rules score).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FEATURES = ("mean_support", "min_support", "mean_lexical", "min_lexical", "min_together", "number_missing",
            "name_missing", "negation", "opposite", "partial", "citation_unsupported", "supported")


@dataclass(frozen=True)
class ClaimSignals:
    """What the rules found for one claim."""

    support: float
    lexical: float
    together: float
    numbers: bool
    names: bool
    negation: bool
    opposites: bool
    partial: bool
    citation_unsupported: bool


def features(claims: Sequence[ClaimSignals], threshold: float) -> list[float]:
    """The answer's signals, in `FEATURES` order (each in [0, 1])."""
    n = len(claims)

    def share(flags: Sequence[bool]) -> float:
        return sum(flags) / n

    return [sum(c.support for c in claims) / n, min(c.support for c in claims),
            sum(c.lexical for c in claims) / n, min(c.lexical for c in claims), min(c.together for c in claims),
            share([c.numbers for c in claims]), share([c.names for c in claims]),
            share([c.negation for c in claims]), share([c.opposites for c in claims]),
            share([c.partial for c in claims]), share([c.citation_unsupported for c in claims]),
            share([c.support >= threshold for c in claims])]
