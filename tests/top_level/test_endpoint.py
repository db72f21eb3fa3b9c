"""`Endpoint`: one model server, its key looked up in one place, whoever calls it."""

from __future__ import annotations

import asyncio

import pytest

from tlmscore._endpoint import Endpoint
from tlmscore.errors import ConfigError, ScorerError


def test_the_key_is_the_first_variable_set_and_a_missing_needed_key_is_one_line_of_the_callers_kind() -> None:
    both = Endpoint(key_envs=("FIRST", "SECOND"), key_needed=True, missing="set FIRST or SECOND", error=ScorerError)
    assert both.key({"FIRST": "a", "SECOND": "b"}) == "a"
    assert both.key({"FIRST": "", "SECOND": "b"}) == "b"  # an empty variable is not a key
    with pytest.raises(ScorerError, match=r"^set FIRST or SECOND$"):
        both.key({})
    assert Endpoint(key_envs=("FIRST",)).key({}) is None  # a local server: no key, none needed
    with pytest.raises(ConfigError):
        Endpoint(key_envs=(), key_needed=True).key({})


def test_the_client_is_built_for_its_own_api_root_with_its_own_key() -> None:
    endpoint = Endpoint("http://127.0.0.1:9/v1", key_envs=("TLMSCORE_TEST_KEY",), key_needed=True)
    client = endpoint.client(timeout=5.0, retries=0, env={"TLMSCORE_TEST_KEY": "sk-test"})
    try:
        assert str(client.base_url).rstrip("/") == "http://127.0.0.1:9/v1"
        assert client.api_key == "sk-test" and client.max_retries == 0
    finally:
        asyncio.run(client.close())
