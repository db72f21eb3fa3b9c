"""`grounding`: how well the evidence in the prompt supports each claim of the response.

Offline, no model, no key, deterministic. It measures grounding — whether what the answer says is
backed by the pages, file search results, tool outputs and instructions the model was given — not
whether it is true in the world.

Method, per input:

1. Evidence: render's values (`ScoringInput.evidence`), else for prompts rendered elsewhere the
   prompt's tool results, and with them (option `messages`, default `context`) the instructions
   and system/developer messages (see `_evidence`). Evidence render marked
   unavailable is missing evidence whatever the prompt says about it. An input with no tool result
   that has text is not scored (`messages="system"` scores it against its instructions alone).
2. Claims (`_claims`): `<think>` text, source lists and citation markers of every
   style removed; each sentence split into clauses, a clause with something to check — at least
   `min_words` content words, or a number, date or name — is a claim, a smaller one joins its
   neighbour; a claim is split into parts where a new predicate starts.
3. Support `s` of a claim by the evidence: lexical overlap with the best passage (synonyms count,
   with option `lexicon` and WordNet installed: `_lexicon`) times the share of the claim's neighbouring
   words that the passage has in one sentence (square root of both), times penalties for numbers,
   dates and names that do not match, a "not" the evidence does not share and an opposite it says
   instead (see `_support` for the weights). A claim of several parts counts the
   mean of its parts' supports, naming the unsupported ones. A page a model read and summarised
   (`--page-source chat`) is weaker evidence than the page's own text: of its support above
   `threshold`, only `summary_weight` counts.
4. Citations: for every citation of a claim's sentence (inline links and markers, `[n]` numbers
   that render's evidence resolves, citation spans from render or the `Conversation`), support `c`
   of the claim by the cited source alone. A claim with cited sources that have text counts
   `(s + max c) / 2`; a cited source that could not be retrieved is listed, not scored.
5. Score: `0.3 * mean + 0.7 * min` over the claims — less the average support, more the weakest
   claim, so one contradicted claim pulls the answer down however long it is (0.3 beat 0.5 on both
   development sets: docs/validity.md). An answer whose
   status is not `completed` is scored on what it finished, times `incomplete`.

`details` lists the claims below `threshold` (with the numbers, names, negation or opposites that
did not match), the partly supported claims with their unsupported parts, the citations whose
source does not support them or could not be retrieved, and the lexicon used (`WordNet 3.0`, or
None without one). NaN with an explanation when the evidence
is empty or the response makes no claim.
"""

from __future__ import annotations

from tlmscore.scoring.grounding._passages import ClaimPassage
from tlmscore.scoring.grounding._scorer import GroundingOptions, GroundingScorer, create

__all__ = ["ClaimPassage", "GroundingOptions", "GroundingScorer", "create"]
