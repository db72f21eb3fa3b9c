"""The breaker: open after `limit` failures in a row (not in all), with the last reason; a success starts over."""

from __future__ import annotations

from tlmscore._breaker import GIVE_UP_AFTER, Breaker


def test_the_breaker_opens_on_the_third_failure_in_a_row_only() -> None:
    breaker = Breaker(noun="requests")
    assert GIVE_UP_AFTER == 3
    breaker.failed("a")
    breaker.failed("b")
    breaker.succeeded()  # two failures, then a success: the count starts again
    breaker.failed("c")
    breaker.failed("d")
    assert breaker.opened is None
    breaker.failed("e")
    assert breaker.opened == "gave up after 3 failed requests in a row (last: e)"
    breaker.failed("f")
    breaker.succeeded()
    assert breaker.opened == "gave up after 3 failed requests in a row (last: e)"  # once open, it stays so


def test_the_limit_is_the_breakers_own() -> None:
    breaker = Breaker(limit=1)
    breaker.failed("x")
    assert breaker.opened == "gave up after 1 failed attempts in a row (last: x)"
