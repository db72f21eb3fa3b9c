"""What requests to a paid model may cost: estimated tokens times a price per million tokens.

Shared by the judge scorer and the page source that asks a model to read pages. `PRICES` holds list
prices in US dollars per million input and output tokens of a few known models (OpenAI's published
standard prices; check them before relying on them). A dated snapshot (`gpt-4o-mini-2024-07-18`)
is priced as its model. Other models take their prices from the caller. Output tokens are counted
at their caps, so the figure is an upper estimate; requests sent through the Batch API cost half.
`Budget` holds a run to its `max_cost`, set of requests by set of requests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from tlmscore.errors import ConfigError

PRICES: Mapping[str, tuple[float, float]] = MappingProxyType({
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
})
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_MILLION = 1_000_000
BATCH_DISCOUNT = 0.5
_BYTES_PER_TOKEN = 4


def price_of(model: str, price_in: float | None = None,
             price_out: float | None = None) -> tuple[float, float] | None:
    """Dollars per million input and output tokens: the given prices, else the table's, else None."""
    known = PRICES.get(_SNAPSHOT.sub("", model.rsplit("/", 1)[-1].lower()))
    if price_in is not None or price_out is not None:
        base = known or (0.0, 0.0)
        return (base[0] if price_in is None else price_in, base[1] if price_out is None else price_out)
    return known


def token_cost(input_tokens: int, output_tokens: int, price: tuple[float, float], *, batch: bool = False) -> float:
    """Dollars for those tokens at `price` (per million input and output tokens), halved through the Batch API."""
    amount = (input_tokens * price[0] + output_tokens * price[1]) / _MILLION
    return amount * BATCH_DISCOUNT if batch else amount


def estimate_tokens(text: str) -> int:
    """A rough token count of `text`: its UTF-8 bytes over 4 (a CJK character counts as 3/4 of a token)."""
    return -(-len(text.encode("utf-8")) // _BYTES_PER_TOKEN)


def dollars(amount: float) -> str:
    """An amount for a person: cents, or three significant digits below a cent (`$0.000412`)."""
    if amount == 0 or amount >= 0.01:  # noqa: PLR2004  (a cent)
        return f"${amount:,.2f}"
    return f"${amount:.3g}"


class Budget:
    """The dollars a run may spend (`limit`, None: no limit), checked before each set of requests is sent.

    `what` starts each message (`judge`, `page model`); `prices` says how to give a price for a
    model the table lacks.
    """

    def __init__(self, limit: float | None, *, what: str, model: str, prices: str) -> None:
        self.limit = limit
        self.planned = 0.0
        self._what = what
        self._model = model
        self._prices = prices

    def check(self, cost: float | None, unsent: str) -> None:
        """Count `cost` in, or raise `ConfigError` when it and what was planned before would pass the limit.

        `unsent` names what is then not sent (`3 rows`, `12 pages`); `cost` None means no price is known.
        """
        if self.limit is None:
            return
        if cost is None:
            raise ConfigError(f"{self._what}: max_cost is set but no price is known for model {self._model!r}: "
                              f"give {self._prices}")
        total = self.planned + cost
        if total > self.limit:
            sent = f" after {dollars(self.planned)} already planned" if self.planned else ""
            raise ConfigError(f"{self._what}: estimated cost {dollars(total)}{sent} is above max_cost "
                              f"{dollars(self.limit)}; no request of these {unsent} was sent")
        self.planned = total
