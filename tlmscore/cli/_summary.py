"""The end-of-run summary printed on stderr: totals, score quantiles, the lowest rows, the first errors."""

from __future__ import annotations

import array
import heapq
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tlmscore.ingest import safe_text

_ERRORS_SHOWN = 10
_LOWEST_SHOWN = 5


@dataclass
class Summary:
    """Running totals for the end-of-run summary, kept small however many rows pass."""

    rows: int = 0
    prepared: int = 0
    """Rows with a prompt: rendered, whether or not the scorer then failed on them."""
    errors: int = 0
    scoring_errors: int = 0
    """Errors of rows that were prepared: the scorer failed on them."""
    warned: int = 0
    urls: int = 0
    urls_failed: int = 0
    urls_model: int = 0
    scores: array.array[float] = field(default_factory=lambda: array.array("d"))
    """Every score, 8 bytes each (the quartiles need them all): a million rows keep 8 MB, not a list's 32."""
    lowest: list[tuple[float, str]] = field(default_factory=list)
    first_errors: list[str] = field(default_factory=list)
    sources: Counter[str] = field(default_factory=Counter)

    def add(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Count a chunk of rows."""
        for row in rows:
            self.rows += 1
            self.sources[str(row.get("source"))] += 1
            self.warned += bool(row.get("warnings"))
            self.urls += int(row.get("n_urls") or 0)
            self.urls_failed += int(row.get("n_urls_failed") or 0)
            self.urls_model += int(row.get("n_urls_model") or 0)
            rendered = row.get("prompt") is not None
            self.prepared += rendered
            if row.get("error"):
                self.errors += 1
                self.scoring_errors += rendered
                if len(self.first_errors) < _ERRORS_SHOWN:
                    self.first_errors.append(str(row["error"]))
            score = row.get("score")
            if isinstance(score, (int, float)) and not math.isnan(score):
                self.scores.append(float(score))
                heapq.heappush(self.lowest, (-float(score), str(row.get("id"))))
                if len(self.lowest) > _LOWEST_SHOWN:
                    heapq.heappop(self.lowest)

    def text(self, output: Path, *, scored: bool) -> str:
        """The summary printed on stderr."""
        summarised = f" ({self.urls_model} of them a model's summary)" if self.urls_model else ""
        in_scoring = f" ({self.scoring_errors} of them in scoring)" if self.scoring_errors else ""
        lines = [f"tlmscore: {self.rows} records → {output}: {self.prepared} prepared, "
                 f"{self.errors} errors{in_scoring}, {self.warned} with warnings; evidence pages: "
                 f"{self.urls - self.urls_failed} ok{summarised}, {self.urls_failed} unavailable"]
        if scored:
            lines.append(f"  scored: {len(self.scores)} of {self.rows}")
            if self.scores:
                # inclusive: the quartiles of the scores themselves, never outside [min, max]
                qs = statistics.quantiles(self.scores, n=4, method="inclusive") if len(self.scores) > 1 \
                    else [self.scores[0]] * 3
                lines.append(f"  score min {min(self.scores):.3f}  q1 {qs[0]:.3f}  median {qs[1]:.3f}  "
                             f"q3 {qs[2]:.3f}  max {max(self.scores):.3f}")
                low = sorted((-s, rid) for s, rid in self.lowest)
                lines.append("  lowest: " + ", ".join(f"{rid} ({s:.3f})" for s, rid in low))
        lines += [f"  error: {e}" for e in self.first_errors]
        if self.errors > len(self.first_errors):
            lines.append(f"  … and {self.errors - len(self.first_errors)} more errors (see the 'error' column)")
        return safe_text("\n".join(lines))  # a file name need not be UTF-8; stderr may not take it
