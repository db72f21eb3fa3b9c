"""Fit the grounding signals' combination on one development set, measure it on the other, and the reverse.

The signals (the grounding scorer's `details["signals"]`, in their order) of every answer of WiCE dev
(each claim-and-chunk row, labelled supported or not) and of SummEdits (every domain; both sets from the
shared `validity/` folder, which the script needs) are computed once with the default rules; a logistic
regression (numpy, L2, standardised features) is fitted on one set and measured on the other against the
hand-set rules' scores:

- fitted on WiCE dev → SummEdits mean AUROC of domains, and pooled;
- fitted on SummEdits → WiCE dev claims (best chunk) supported vs not, and supported vs the rest.

    python benchmarks/fit_grounding.py --grounding-options '{"lexicon": false}'   # both directions
    python benchmarks/fit_grounding.py --write weights.json   # and the two fits' weights, as data

A fit is to ship (as the package's data, with a scorer option to use it) only when it beats the
rules on the set it was not fitted on. On 2026-11-25 neither direction did (docs/validity.md), so
the scorer combines by the rules and this script stays to measure the next set of signals.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _validity as vb
import numpy as np
from _common import require

from tlmscore import ScoringInput, Settings, read_transcripts, render
from tlmscore.convert import convert_transcript
from tlmscore.scoring.grounding import GroundingOptions, GroundingScorer

L2 = 1.0
STEPS = 50


@dataclass(frozen=True)
class Weights:
    """A fitted logistic regression: standardisation, coefficients, intercept, and what it was fitted on."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    fitted_on: str

    def probability(self, values: Sequence[float]) -> float:
        """The fitted probability that the answer is supported."""
        z = self.intercept + sum(w * (v - m) / s for w, v, m, s in
                                 zip(self.coef, values, self.mean, self.scale, strict=True))
        return 1 / (1 + math.exp(-max(min(z, 50.0), -50.0)))

    def as_json(self) -> dict[str, Any]:
        return {"features": list(self.features), "mean": list(self.mean), "scale": list(self.scale),
                "coef": list(self.coef), "intercept": self.intercept, "fitted_on": self.fitted_on}


def inputs(records: Sequence[dict[str, Any]]) -> list[ScoringInput]:
    """The records rendered as the pipeline renders them (no pages: the evidence is a tool output)."""
    settings = Settings()
    return [render(convert_transcript(t, settings), {}, settings) for t in read_transcripts(list(records))]


def signals(scorer: GroundingScorer, records: Sequence[dict[str, Any]]) -> tuple[list[list[float] | None], list[float]]:
    """Each record's signals (None when unscorable), in `features(scorer)` order, and its score under the rules."""
    names = features(scorer)
    found, scores = [], []
    for item in inputs(records):
        score = scorer.score_one(item)
        scores.append(score.score)
        found.append(None if math.isnan(score.score) else [score.details["signals"][f] for f in names])
    return found, scores


def features(scorer: GroundingScorer) -> tuple[str, ...]:
    """The names of the scorer's signals, in the order its details list them (scored on a one-claim answer)."""
    record = vb.document_record("features", 0, {"doc": "The bridge opened in 1932.", "summary": "The bridge opened "
                                                "in 1932.", "label": 1})
    return tuple(scorer.score_one(inputs([record])[0]).details["signals"])


def fit(x: np.ndarray, y: np.ndarray, what: str, names: tuple[str, ...]) -> Weights:
    """L2-regularised logistic regression by Newton's method on standardised features."""
    mean = x.mean(axis=0)
    scale = np.where(x.std(axis=0) > 1e-9, x.std(axis=0), 1.0)
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    penalty = np.eye(z.shape[1]) * L2
    penalty[0, 0] = 0.0  # the intercept is not shrunk
    for _ in range(STEPS):
        p = 1 / (1 + np.exp(-z @ w))
        gradient = z.T @ (p - y) + penalty @ w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    return Weights(names, tuple(mean.tolist()), tuple(scale.tolist()), tuple(w[1:].tolist()), float(w[0]),
                   f"{what}, {len(y)} rows, fitted {today} by benchmarks/fit_grounding.py")


def _fitted_scores(weights: Weights, found: Sequence[list[float] | None]) -> list[float]:
    return [math.nan if f is None else weights.probability(f) for f in found]


def wice_figures(records: Sequence[dict[str, Any]], scores: Sequence[float]) -> tuple[float, float]:
    """WiCE dev claims, best chunk: AUROC supported vs not, and supported vs the rest."""
    claims = list(vb.claim_scores(records, {r["id"]: s for r, s in zip(records, scores, strict=True)}).values())
    strict = [(s, int(label == "supported")) for s, label in claims if label != "partially_supported"]
    rest = [(s, int(label == "supported")) for s, label in claims]
    return vb.compare("", "", strict, 0.0).auroc, vb.compare("", "", rest, 0.0).auroc


def summedits_figures(domains: Mapping[str, Sequence[dict[str, Any]]],
                      scores: Mapping[str, Sequence[float]]) -> tuple[float, float]:
    """SummEdits: the mean of the domains' AUROCs, and the pooled AUROC."""
    parts, pooled = [], []
    for d, records in domains.items():
        pairs = [(s, int(r["metadata"]["label"])) for r, s in zip(records, scores[d], strict=True)]
        parts.append(vb.compare("", "", pairs, 0.0).auroc)
        pooled += pairs
    return sum(parts) / len(parts), vb.compare("", "", pooled, 0.0).auroc


def _training(found: Sequence[list[float] | None], labels: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    kept = [(f, y) for f, y in zip(found, labels, strict=True) if f is not None]
    return np.array([f for f, _ in kept]), np.array([y for _, y in kept], dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grounding-options", default="{}", help="JSON options of the rules the signals come from")
    parser.add_argument("--limit", type=int, default=None, help="first N rows of each SummEdits domain")
    parser.add_argument("--write", default=None, help="write both fits' weights to this JSON file")
    args = parser.parse_args()
    scorer = GroundingScorer(GroundingOptions(**json.loads(args.grounding_options)))
    wice_file, summedits = require(vb.WICE, "the WiCE development set"), require(vb.SUMMEDITS, "SummEdits")
    wice = [vb.wice_record(n, row) for n, row in enumerate(vb.wice_rows(wice_file, None))]
    domains = {d: [vb.document_record(d, n, row)
                   for n, row in enumerate(vb.summedits_rows(summedits, d, args.limit))] for d in vb.DOMAINS}
    wice_found, wice_rules = signals(scorer, wice)
    se = {d: signals(scorer, records) for d, records in domains.items()}
    se_found = [f for d in domains for f in se[d][0]]
    se_labels = [int(r["metadata"]["label"]) for d in domains for r in domains[d]]
    names = features(scorer)
    on_wice = fit(*_training(wice_found, [int(r["metadata"]["label"]) for r in wice]), "WiCE dev (oracle chunks)",
                  names)
    on_se = fit(*_training(se_found, se_labels), "SummEdits, all eight domains", names)
    rules_w, rules_s = wice_figures(wice, wice_rules), summedits_figures(domains, {d: se[d][1] for d in domains})
    fitted_s = summedits_figures(domains, {d: _fitted_scores(on_wice, se[d][0]) for d in domains})
    fitted_w = wice_figures(wice, _fitted_scores(on_se, wice_found))
    print(f"fit_grounding {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}, rules: {args.grounding_options}")
    print("| measured on | rules | fitted on the other set |\n|---|---:|---:|")
    print(f"| SummEdits mean of domains (fitted on WiCE dev) | {rules_s[0]:.3f} | {fitted_s[0]:.3f} |")
    print(f"| SummEdits pooled (fitted on WiCE dev) | {rules_s[1]:.3f} | {fitted_s[1]:.3f} |")
    print(f"| WiCE dev supported vs not (fitted on SummEdits) | {rules_w[0]:.3f} | {fitted_w[0]:.3f} |")
    print(f"| WiCE dev supported vs rest (fitted on SummEdits) | {rules_w[1]:.3f} | {fitted_w[1]:.3f} |")
    for name, weights in (("WiCE", on_wice), ("SummEdits", on_se)):
        print(f"{name} fit: " + ", ".join(f"{f} {c:+.2f}" for f, c in zip(names, weights.coef, strict=True)))
    if args.write:
        fits = {"wice": on_wice.as_json(), "summedits": on_se.as_json()}
        Path(args.write).write_text(json.dumps(fits, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
