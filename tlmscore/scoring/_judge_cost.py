"""What a judge run may cost in money: estimated tokens times a price per million tokens.

`PRICES` holds list prices in US dollars per million input and output tokens of a few known
models (OpenAI's published standard prices; check them before relying on them). A dated snapshot
(`gpt-4o-mini-2024-07-18`) is priced as its model. Other models take `price_in`/`price_out`; the
Batch API costs half. Output tokens are counted at their caps, so the figure is an upper estimate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

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


def price_of(model: str, price_in: float | None = None,
             price_out: float | None = None) -> tuple[float, float] | None:
    """Dollars per million input and output tokens: the given prices, else the table's, else None."""
    known = PRICES.get(_SNAPSHOT.sub("", model.rsplit("/", 1)[-1].lower()))
    if price_in is not None or price_out is not None:
        base = known or (0.0, 0.0)
        return (base[0] if price_in is None else price_in, base[1] if price_out is None else price_out)
    return known


def cost_of(input_tokens: int, output_tokens: int, price: tuple[float, float], *, batch: bool = False) -> float:
    """Dollars for those tokens at `price` (per million), halved through the Batch API."""
    dollars = (input_tokens * price[0] + output_tokens * price[1]) / _MILLION
    return dollars * BATCH_DISCOUNT if batch else dollars


def dollars(amount: float) -> str:
    """An amount for a person: cents, or three significant digits below a cent (`$0.000412`)."""
    if amount == 0 or amount >= 0.01:  # noqa: PLR2004  (a cent)
        return f"${amount:,.2f}"
    return f"${amount:.3g}"
