"""`Breaker`: stop sending to an endpoint once it has failed a few times in a row.

Shared by write-back (a store's target is given up after 3 failed attempts in a row) and by the
model clients (a judge endpoint, a page model, Cleanlab's TLM API): once open, the breaker says why,
and the caller fails what is left at once, with that reason, instead of trying each item again.
"""

from __future__ import annotations

from dataclasses import dataclass

GIVE_UP_AFTER = 3
"""Failed attempts in a row after which an endpoint is given up."""


@dataclass
class Breaker:
    """Failures in a row of one endpoint; `opened` (None while it is closed) says why it was given up."""

    limit: int = GIVE_UP_AFTER
    noun: str = "attempts"
    """What is counted, in the reason: `attempts` (write-back's tries), `requests`, `batches`."""
    in_a_row: int = 0
    opened: str | None = None

    def succeeded(self) -> None:
        """An attempt went through: the count starts again."""
        self.in_a_row = 0

    def failed(self, reason: str) -> None:
        """An attempt failed for `reason`; the `limit`-th in a row opens the breaker."""
        self.in_a_row += 1
        if self.opened is None and self.in_a_row >= self.limit:
            self.opened = f"gave up after {self.in_a_row} failed {self.noun} in a row (last: {reason})"
