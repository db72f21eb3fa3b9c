"""What a judge run may cost in money: the shared estimate (`tlmscore._cost`), at half price through the Batch API.

Known models take the price table's prices (`tlmscore._cost.PRICES`), others `price_in`/`price_out`.
Output tokens are counted at their caps, so the figure is an upper estimate.
"""

from __future__ import annotations

from tlmscore._cost import token_cost

BATCH_DISCOUNT = 0.5


def cost_of(input_tokens: int, output_tokens: int, price: tuple[float, float], *, batch: bool = False) -> float:
    """Dollars for those tokens at `price` (per million), halved through the Batch API."""
    amount = token_cost(input_tokens, output_tokens, price)
    return amount * BATCH_DISCOUNT if batch else amount
