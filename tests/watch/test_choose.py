"""Which calls a watch scores: the sample by a hash of the trace id, and `--where`."""

from __future__ import annotations

import hashlib

import pytest

from tlmscore.errors import ConfigError
from tlmscore.watch import Condition, check_rate, kept, parse_where, sample_key, sampled, tool_kinds

TRACES = [f"{n:032x}" for n in range(2000)]


def test_the_sample_is_the_first_eight_bytes_of_sha256_below_the_rate() -> None:
    for trace in TRACES[:200]:
        bucket = int.from_bytes(hashlib.sha256(trace.encode()).digest()[:8], "big") / 2**64
        assert sampled(trace, 0.3) == (bucket < 0.3)


def test_a_rate_keeps_about_its_share_and_a_higher_rate_keeps_every_call_a_lower_one_kept() -> None:
    low = {t for t in TRACES if sampled(t, 0.2)}
    high = {t for t in TRACES if sampled(t, 0.5)}
    assert 0.15 < len(low) / len(TRACES) < 0.25
    assert 0.45 < len(high) / len(TRACES) < 0.55
    assert low <= high
    assert all(sampled(t, 1.0) for t in TRACES)


def test_the_sample_is_decided_by_the_trace_so_every_span_of_a_trace_goes_together() -> None:
    trace = TRACES[7]
    spans = [{"trace_id": trace, "span_id": f"{n:016x}", "id": str(n)} for n in range(20)]
    assert len({sampled(sample_key(s), 0.5) for s in spans}) == 1
    assert sample_key({"trace_id": "0xABC", "span_id": "1"}) == "abc"
    assert sample_key({"span_id": "12", "id": "x"}) == "12"
    assert sample_key({"id": "x"}) == "x"


@pytest.mark.parametrize("rate", [0.0, -0.1, 1.5])
def test_a_rate_outside_zero_to_one_is_refused(rate: float) -> None:
    with pytest.raises(ConfigError, match="--sample"):
        check_rate(rate)


CALL = {"request": {"model": "gpt-4o-mini", "tools": [{"type": "web_search"}, {"type": "function", "name": "f"}]},
        "response": {"model": "gpt-4o-mini-2024-07-18", "output": [{"type": "file_search_call"}]},
        "metadata": {"span_name": "ChatCompletion"}}


def test_where_matches_the_model_with_wildcards_and_negation() -> None:
    assert kept(parse_where(["model=gpt-4o*"]), CALL, {})
    assert not kept(parse_where(["model=gpt-5*"]), CALL, {})
    assert kept(parse_where(["model!=gpt-5*"]), CALL, {})
    assert not kept(parse_where(["model=gpt-4o*", "model!=*mini"]), CALL, {})


def test_where_matches_metadata_from_the_record_and_the_store() -> None:
    assert kept(parse_where(["metadata.span_name=Chat*"]), CALL, {})
    assert kept(parse_where(["metadata.tenant=acme"]), CALL, {"tenant": "acme"})
    assert not kept(parse_where(["metadata.tenant=acme"]), CALL, {"tenant": "other"})
    assert not kept(parse_where(["metadata.tenant=*"]), CALL, {})


def test_where_matches_the_kinds_of_tool_offered_or_used() -> None:
    assert tool_kinds(CALL) == {"web_search", "function", "file_search"}
    chat = {"request": {"model": "m"}, "response": {"choices": [{"message": {"tool_calls": [{"type": "function"}]}}]}}
    assert tool_kinds(chat) == {"function"}
    assert kept(parse_where(["tool=file_search"]), CALL, {})
    assert not kept(parse_where(["tool!=web_search"]), CALL, {})
    assert kept(parse_where(["tool!=web_search"]), chat, {})


@pytest.mark.parametrize("text", ["model", "size=3", "metadata.=x", "=x"])
def test_a_where_that_is_not_a_condition_is_one_line(text: str) -> None:
    with pytest.raises(ConfigError, match=r"expected FIELD=PATTERN"):
        Condition.parse(text)
