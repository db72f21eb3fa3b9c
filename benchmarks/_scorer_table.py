"""Every scorer on samples of both development sets, per row, and the table of docs/scorers.md made from it.

A helper of `validity_bench.py --scorer-table PAGE` (see its docstring). Samples, fixed by a seed (7):

- WiCE development split, row level (a claim and one annotator's chunk; not the best chunk per
  claim): `--sample` rows (150) shuffled; supported vs not supported (partially supported rows left
  out), and supported vs the rest.
- SummEdits: `--sample / 8` rows of each of the eight domains (19 each: 152), shuffled per domain;
  consistent vs inconsistent, pooled. The documents are long: the judge in claims mode sends each
  summary sentence with at most `passage_chars` of its document.

Each row is scored by `grounding` (its score and its signals) and, with `--judge-options`, by the
judge. Per-row results go to a JSON file (`--scores`, rewritten after each set, so a long run keeps
what it measured); the table is computed from that file, so `--from-scores FILE` rewrites the page
without scoring again. The combinations of grounding and the judge are computed from the same rows
(no more requests):

- `blend`: the mean of the two scores on every row;
- `cascade`: grounding's score where it is sure — at or below `low`, or at or above `high`, with no
  number, date, name, negation or opposite of a claim missing from the evidence — and the mean of
  the two elsewhere, which are the only rows the model is asked about. `low` and `high` are chosen
  on one set (the best AUROC, supported vs not for WiCE, on a fixed grid) and reported on the other.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import random
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tlmscore
from tlmscore._cost import price_of, token_cost
from tlmscore.settings import Settings

SEED = 7
DOMAINS = 8
LOWS = (0.0, 0.05, 0.1, 0.2, 0.3)
HIGHS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.01)
FLAGS = ("number_missing", "name_missing", "negation", "opposite")
BEGIN = "<!-- scorer table: begin (python benchmarks/validity_bench.py --scorer-table docs/scorers.md) -->"
END = "<!-- scorer table: end -->"

COMPARED_MODEL = "gpt-4.1-mini"
MODEL_NAMES = {"qwen2.5-coder-1.5b-instruct": "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (local)",
               "qwen2.5-coder-1.5b": "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (local)",
               "qwen2.5-coder-0.5b": "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (local)"}

Auroc = Callable[[Sequence[float], Sequence[int]], float]


def wice_sample(rows: Sequence[dict[str, Any]], record: Callable[[int, dict[str, Any]], dict[str, Any]],
                n: int) -> list[dict[str, Any]]:
    """`n` WiCE rows (claim and chunk) at random, as transcript records."""
    records = [record(i, row) for i, row in enumerate(rows)]
    random.Random(SEED).shuffle(records)
    return records[:n]


def summedits_sample(by_domain: Mapping[str, list[dict[str, Any]]], n: int) -> list[dict[str, Any]]:
    """`n / 8` records of each SummEdits domain at random."""
    picked: list[dict[str, Any]] = []
    for domain in sorted(by_domain):
        records = list(by_domain[domain])
        random.Random(f"{SEED}-{domain}").shuffle(records)
        picked += records[:max(1, n // DOMAINS)]
    return picked


def _scores(records: list[dict[str, Any]], scorer: str, options: dict[str, Any],
            cache: Path) -> tuple[dict[str, tuple[float, dict[str, Any]]], float, float]:
    """Each record's (score, details) by id, and the wall and CPU seconds of scoring them."""
    wall, cpu = time.perf_counter(), time.process_time()
    frame = tlmscore.score(records, scorer, Settings(offline=True, cache_dir=cache, progress=False), options=options)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    found = {str(i): (math.nan if s is None or (isinstance(s, float) and math.isnan(s)) else float(s),
                      d if isinstance(d, dict) else {})
             for i, s, d in zip(frame["id"], frame["score"], frame["details"], strict=True)}
    return found, wall, cpu


class _Plans(logging.Handler):
    """The judge's plan lines while scoring: the input tokens it estimated, summed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.tokens = 0
        self._logger = logging.getLogger("tlmscore.scoring.judge")
        self._level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"about ([\d,]+) input tokens", record.getMessage())
        if found:
            self.tokens += int(found.group(1).replace(",", ""))

    def __enter__(self) -> _Plans:
        self._logger.addHandler(self)
        self._logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *_: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)


def measure(name: str, records: list[dict[str, Any]], judge: dict[str, Any] | None, cache: Path) -> dict[str, Any]:
    """One set's rows with every scorer's score, and each scorer's seconds."""
    rows = [{"id": r["id"], "label": int(r["metadata"]["label"]), "wice_label": r["metadata"].get("wice_label")}
            for r in records]
    grounding, wall, cpu = _scores(records, "grounding", {}, cache)
    seconds = {"grounding": {"wall": wall, "cpu": cpu}}
    for row in rows:
        score, details = grounding[row["id"]]
        row["grounding"] = score
        row["flags"] = [f for f in FLAGS if details.get("signals", {}).get(f, 0) > 0]
    if judge is not None:
        with _Plans() as plans:
            judged, wall, cpu = _scores(records, "judge", judge, cache)
        seconds["judge"] = {"wall": wall, "cpu": cpu, "input_tokens": plans.tokens}
        for row in rows:
            score, details = judged[row["id"]]
            row["judge"] = score
            row["judge_requests"] = len(details.get("claims", []))
    return {"set": name, "rows": rows, "seconds": seconds}


def run(wice: list[dict[str, Any]], summedits: list[dict[str, Any]], judge: dict[str, Any] | None,
        out: Path) -> dict[str, Any]:
    """Both samples scored; the results written to `out` after each set."""
    result: dict[str, Any] = {"date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}",
                              "tlmscore": tlmscore.__version__, "seed": SEED, "judge": judge, "sets": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, records in (("wice", wice), ("summedits", summedits)):
            if records:
                result["sets"][name] = measure(name, records, judge, Path(tmp))
                out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def _mean(a: float, b: float) -> float:
    return (a + b) / 2


def sure(row: Mapping[str, Any], low: float, high: float) -> bool:
    """Whether grounding is sure of a row: a score at or below `low` or at or above `high`, no fact missing."""
    g = row["grounding"]
    return not math.isnan(g) and (g <= low or (g >= high and not row["flags"]))


def combined(rows: Sequence[Mapping[str, Any]], how: str, low: float = 0.0, high: float = 1.01) -> list[float]:
    """Each row's combined score: `blend` (the mean everywhere) or `cascade` (grounding where sure)."""
    out = []
    for row in rows:
        g, j = row["grounding"], row.get("judge", math.nan)
        if how == "cascade" and sure(row, low, high):
            out.append(g)
        else:
            out.append(j if math.isnan(g) else g if math.isnan(j) else _mean(g, j))
    return out


def _views(name: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """The row indexes and labels each figure of a set is computed on."""
    if name == "wice":
        return {"WiCE s vs not": [i for i, r in enumerate(rows) if r["wice_label"] != "partially_supported"],
                "WiCE s vs rest": list(range(len(rows)))}
    return {"SummEdits": list(range(len(rows)))}


def figures(name: str, rows: Sequence[Mapping[str, Any]], scores: Sequence[float], auroc: Auroc) -> dict[str, float]:
    """AUROC of `scores` on each view of a set (NaN scores left out)."""
    found = {}
    for view, ids in _views(name, rows).items():
        pairs = [(scores[i], rows[i]["label"]) for i in ids if not math.isnan(scores[i])]
        found[view] = auroc([s for s, _ in pairs], [y for _, y in pairs])
    return found


def choose(name: str, rows: Sequence[Mapping[str, Any]], auroc: Auroc) -> tuple[float, float]:
    """The cascade's (low, high) with the best AUROC on a set (its first view), fewest rows sent on a tie."""
    view = next(iter(_views(name, rows)))
    best: tuple[float, int, float, float] = (-1.0, 0, 0.0, 1.01)
    for low in LOWS:
        for high in HIGHS:
            value = figures(name, rows, combined(rows, "cascade", low, high), auroc)[view]
            kept = sum(1 for r in rows if sure(r, low, high))
            if (value, kept) > best[:2]:
                best = (value, kept, low, high)
    return best[2], best[3]


def _f(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def _per_row(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _thousand(seconds: float) -> str:
    seconds *= 1000
    return f"{seconds:.0f} s" if seconds < 3600 else f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class _Line:
    """One scorer's figures: AUROC by view, seconds per row, and a cost note."""

    name: str
    checks: str
    needs: str
    auroc: dict[str, float]
    seconds: float
    cost: str


def _judge_cost(tokens_per_row: float, requests_per_row: float) -> str:
    price = price_of(COMPARED_MODEL)
    dollars = token_cost(round(tokens_per_row * 1000), round(requests_per_row * 1000), price) if price else math.nan
    return (f"$0 on your machine; about {tokens_per_row:,.0f} input tokens a row, ${dollars:.2f} per 1,000 rows "
            f"at {COMPARED_MODEL}'s price")


def lines(result: Mapping[str, Any], auroc: Auroc) -> tuple[list[_Line], dict[str, Any]]:
    """The table's lines, and the cascade's choices (thresholds chosen on one set, rows sent on the other)."""
    sets = result["sets"]
    every: dict[str, dict[str, float]] = {}
    seconds: dict[str, float] = {}
    requests = tokens = rows_judged = 0.0
    chosen: dict[str, Any] = {}
    for name, data in sets.items():
        rows = data["rows"]
        other = next((o for o in sets if o != name), name)
        low, high = choose(other, sets[other]["rows"], auroc)
        sent = sum(1 for r in rows if not sure(r, low, high)) / len(rows)
        chosen[name] = {"on": other, "low": low, "high": high, "sent": sent}
        scorers = {"grounding": [r["grounding"] for r in rows]}
        if "judge" in data["seconds"]:
            scorers |= {"judge": [r["judge"] for r in rows], "blend": combined(rows, "blend"),
                        "cascade": combined(rows, "cascade", low, high)}
            requests += sum(r.get("judge_requests", 0) for r in rows)
            tokens += data["seconds"]["judge"].get("input_tokens", 0)
            rows_judged += len(rows)
        for scorer, scores in scorers.items():
            every.setdefault(scorer, {}).update(figures(name, rows, scores, auroc))
        seconds.setdefault("grounding", 0.0)
        seconds["grounding"] += data["seconds"]["grounding"]["cpu"] / len(rows) / len(sets)
        if "judge" in data["seconds"]:
            per_row = data["seconds"]["judge"]["wall"] / len(rows)
            seconds["judge"] = seconds.get("judge", 0.0) + per_row / len(sets)
            seconds["cascade"] = seconds.get("cascade", 0.0) + sent * per_row / len(sets)
    found = [_Line("`grounding`", "each claim's words, numbers, dates, names, negation and opposites against the "
                   "evidence, lexically", "nothing: offline, no model, no key", every["grounding"],
                   seconds["grounding"], "$0")]
    if "judge" in every:
        model = MODEL_NAMES.get(str((result.get("judge") or {}).get("model")), "the judge model")
        cost = _judge_cost(tokens / rows_judged, requests / rows_judged)
        found += [
            _Line(f"`judge`, `mode=claims`, {model}", "each answer sentence against the evidence it needs, asked of "
                  "a model: P(yes)", "an OpenAI-compatible endpoint (`tlmscore judge-server`)", every["judge"],
                  seconds["judge"], cost),
            _Line("blend: mean of `grounding` and the judge", "both, on every row", "both",
                  every["blend"], seconds["judge"] + seconds["grounding"], cost),
            _Line("cascade: `grounding` where sure, else the blend", "both; the model only on the rows grounding is "
                  "unsure of", "both", every["cascade"], seconds["cascade"] + seconds["grounding"],
                  "the judge's, for the share of rows sent")]
    return found, chosen


def table(result: Mapping[str, Any], auroc: Auroc) -> str:
    """The Markdown table of every scorer, and what the cascade chose on which set."""
    found, chosen = lines(result, auroc)
    views = ("WiCE s vs not", "WiCE s vs rest", "SummEdits")
    sizes = {name: len(data["rows"]) for name, data in result["sets"].items()}
    out = [f"Measured {result['date']} (tlmscore {result['tlmscore']}) on {sizes.get('wice', 0)} rows of the WiCE "
           f"development split and {sizes.get('summedits', 0)} of SummEdits ({sizes.get('summedits', 0) // DOMAINS} "
           f"per domain), drawn with seed {SEED}; time is wall time per row on this two-core machine, shared "
           "(the judge's is the local server's answer time; grounding's is CPU time).",
           "",
           "| scorer | what it checks | what it needs | AUROC WiCE dev, supported vs not | AUROC WiCE dev, supported "
           "vs rest | AUROC SummEdits | time per row | time per 1,000 rows | cost per 1,000 rows |",
           "|---|---|---|---:|---:|---:|---:|---:|---|"]
    out += [f"| {line.name} | {line.checks} | {line.needs} | " + " | ".join(_f(line.auroc.get(v, math.nan))
                                                                           for v in views)
            + f" | {_per_row(line.seconds)} | {_thousand(line.seconds)} | {line.cost} |" for line in found]
    out += ["| `judge`, `mode=answer` (the default) | the whole answer against the whole rendered prompt, "
            "rated A/B/C twice | an OpenAI-compatible endpoint | not measured | not measured | not measured | "
            "not measured: two requests of about 1,900 input tokens each a SummEdits row | - | - |",
            "| `tlm` | Cleanlab TLM's trustworthiness | a Cleanlab key | not measured (no key here) | - | - | - | - "
            "| Cleanlab's price |"]
    titles = {"wice": "WiCE", "summedits": "SummEdits"}
    for name, c in chosen.items():
        if "judge" in result["sets"][name]["seconds"]:
            high = f"high {c['high']:g}" if c["high"] <= 1 else "no high threshold (a high score is never sure)"
            out.append("")
            out.append(f"Cascade on {titles.get(name, name)}: thresholds chosen on {titles.get(c['on'], c['on'])} "
                       f"(the best AUROC on the grid), low {c['low']:g}, {high}; {100 * c['sent']:.0f}% of the "
                       f"{titles.get(name, name)} rows sent to the model.")
    return "\n".join(out)


def write(page: Path, text: str) -> None:
    """`text` between the page's markers (added at its end when it has none)."""
    old = page.read_text(encoding="utf-8")
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        new = f"{head}{BEGIN}\n{text}\n{END}{rest.split(END, 1)[1]}"
    else:
        new = f"{old.rstrip()}\n\n{BEGIN}\n{text}\n{END}\n"
    page.write_text(new, encoding="utf-8")
