"""`judge`: trust from any OpenAI-compatible chat model, after the BSDetector/TLM recipe.

Chen & Mueller, "Quantifying Uncertainty in Answers from any Language Model" (BSDetector, 2023),
which Cleanlab's TLM builds on, combine two signals; this scorer computes both with the judge model:

- **Self-reflection `S`.** The judge is shown the prompt and the proposed answer and asked, with
  `reflections` (≥ 2) differently worded prompts, to rate it: A) correct = 1, B) incorrect = 0,
  C) unsure = 0.5. When the endpoint returns token log-probabilities, a rating's value is its
  expectation under the judge's probabilities of the three letters at the rating token
  (renormalised over A/B/C); otherwise the rated letter's value. `S` is the mean over prompts.
- **Observed consistency `O`** (optional, `samples = k > 0`). The judge answers the prompt itself
  `k` times at `sample_temperature`; each alternative is compared with the proposed answer
  (A) same facts and conclusion = 1, B) contradicts = 0, C) unsure = 0.5, valued as above), and `O`
  is the mean. BSDetector measures this agreement with an NLI model; here the judge does it.

Trust = `beta * O + (1 - beta) * S` with `beta = 0.7` as in BSDetector when samples are taken,
else `S`.

With `mode="claims"` (`_facts`) the judge instead asks about each claim of the answer once, with
only the evidence that claim needs (the claims and evidence `grounding` checks), in one token:
the claim's value is P(yes) from the token's log-probabilities, or its verdict word without them,
and the row's score `0.3 * mean + 0.7 * min` over its claims.

Unparseable output never becomes an invented score: a rating the parser cannot read counts as
unsure (0.5) and is flagged in `details`; when no rating of an input could be read at all, its
score is NaN with an explanation. Errors after retries (HTTP, timeouts) fail that row only.

An answer that did not finish (`ScoringInput.status` other than `completed`, e.g.
`incomplete:max_output_tokens`) is shown to the judge with a note saying so after it, so the judge
rates what was said knowing that the rest is missing; `details["response_status"]` keeps the status.

Requests go through the openai SDK (`tlmscore._chat`), live with `concurrency` in flight, or,
with `batch=True`, through the Batch API (`_batch`, `_batch_api`) at half the price.
Live verdicts are kept on disk (`_cache`, in `cache_dir`, which a run sets to
`Settings.cache_dir/judge`), keyed by a hash of the messages, model, endpoint and the options that
change a reply: a rerun or a resumed run sends no request twice (`cache=False` turns it off).
Before each set of rows is sent, the number of requests and an estimate of their tokens are
logged (logger `tlmscore.scoring.judge`, level INFO; `plan` gives the same figures as a value).
"""

from __future__ import annotations

from tlmscore._cost import estimate_tokens
from tlmscore.scoring.judge._facts import FACT_PROMPT, fact_messages, p_yes
from tlmscore.scoring.judge._options import Judged, JudgeOptions, JudgePlan
from tlmscore.scoring.judge._prompts import (
    AGREEMENT_PROMPT,
    LETTER_VALUES,
    REFLECTION_PROMPTS,
    Rating,
    messages_of,
    parse_rating,
    rate,
)
from tlmscore.scoring.judge._scorer import SPEC, JudgeScorer, create, status_note

__all__ = [
    "AGREEMENT_PROMPT",
    "FACT_PROMPT",
    "LETTER_VALUES",
    "REFLECTION_PROMPTS",
    "SPEC",
    "JudgeOptions",
    "JudgePlan",
    "JudgeScorer",
    "Judged",
    "Rating",
    "create",
    "estimate_tokens",
    "fact_messages",
    "messages_of",
    "p_yes",
    "parse_rating",
    "rate",
    "status_note",
]
