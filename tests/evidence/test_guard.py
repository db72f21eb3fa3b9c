"""The address guard: which URLs may be fetched, and from which address."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tlmscore.errors import FetchError
from tlmscore.evidence import _guard as guard
from tlmscore.evidence._guard import address_problem, check_url, parse_ip_literal


def fixed_resolver(table: dict[str, Sequence[str]]) -> guard.Resolver:
    """A resolver that knows only `table`; other names fail like a real NXDOMAIN."""

    async def resolve(host: str, port: int) -> Sequence[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    return resolve


def check(url: str, allow: frozenset[str] = frozenset(), table: dict[str, Sequence[str]] | None = None):
    return asyncio.run(check_url(url, allow_hosts=allow, resolver=fixed_resolver(table or {})))


def refusal(url: str, **kwargs: object) -> FetchError:
    with pytest.raises(FetchError) as caught:
        check(url, **kwargs)  # type: ignore[arg-type]
    return caught.value


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 -- an address under test; nothing binds to it
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "not a globally routable"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("fe80::1", "link-local"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback address inside an IPv6"),
        ("::ffff:169.254.169.254", "link-local address inside an IPv6"),
        ("::ffff:10.0.0.1", "private address inside an IPv6"),
        ("2002:7f00:1::", "loopback address inside an IPv6"),  # 6to4 of 127.0.0.1
        ("64:ff9b::a00:1", "private address inside an IPv6"),  # NAT64 of 10.0.0.1
        ("::127.0.0.1", "reserved"),  # IPv4-compatible, deprecated
    ],
)
def test_address_problem_names_the_reason(address: str, reason: str) -> None:
    problem = address_problem(ipaddress.ip_address(address))
    assert problem is not None
    assert reason in problem


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700::6810:84e5", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("literal", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("[::1]", "::1"),
        ("::ffff:7f00:1", "::ffff:127.0.0.1"),
    ],
)
def test_legacy_ip_spellings_are_read_like_the_resolver(literal: str, address: str) -> None:
    assert parse_ip_literal(literal) == ipaddress.ip_address(address)


@pytest.mark.parametrize("name", ["example.com", "localhost", "1.2.3.4.example", "", "a b"])
def test_names_are_not_ip_literals(name: str) -> None:
    assert parse_ip_literal(name) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost.:80/",  # resolved by the table below
        "http://[::1]:8080/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://127.1/",
        "http://10.0.0.1/admin",
        "https://[fe80::1]/",
        "http://[fd00::1]/",
    ],
)
def test_urls_naming_internal_addresses_are_blocked(url: str) -> None:
    error = refusal(url, table={"localhost": ["127.0.0.1"]})
    assert error.status == "blocked"
    assert "refused" in str(error)


def test_a_name_resolving_to_loopback_is_blocked_and_named() -> None:
    error = refusal("http://evil.test/steal", table={"evil.test": ["127.0.0.1"]})
    assert error.status == "blocked"
    assert str(error) == "refused: evil.test resolves to 127.0.0.1, which is a loopback address"


def test_one_private_answer_among_public_ones_is_enough_to_block() -> None:
    error = refusal("http://mixed.test/", table={"mixed.test": ["93.184.215.14", "10.0.0.5"]})
    assert error.status == "blocked"


@pytest.mark.parametrize("url", ["ftp://example.com/f", "file:///etc/passwd", "javascript:alert(1)", "/relative"])
def test_only_http_and_https(url: str) -> None:
    error = refusal(url)
    assert error.status == "blocked"
    assert "only http and https" in str(error)


@pytest.mark.parametrize(
    "url", ["http://", "http:///path", "http://[::1/", "http://exa mple.com/", "http://a.test:99999/", "http://a:-1/"]
)
def test_unparseable_urls_are_blocked(url: str) -> None:
    assert refusal(url).status == "blocked"


def test_unknown_names_are_dns_errors() -> None:
    error = refusal("https://no-such-host.test/")
    assert error.status == "dns_error"
    assert "could not resolve no-such-host.test" in str(error)


def test_empty_answers_are_dns_errors() -> None:
    assert refusal("https://empty.test/", table={"empty.test": []}).status == "dns_error"


def test_public_name_resolves_to_the_address_to_connect_to() -> None:
    target = check("https://News.Example.test:8443/a?b=1", table={"news.example.test": ["93.184.215.14"]})
    assert target.addresses == ("93.184.215.14",)
    assert target.host == "news.example.test"
    assert str(target.request_url("93.184.215.14")) == "https://93.184.215.14:8443/a?b=1"
    assert target.request_headers() == {"Host": "news.example.test:8443"}
    assert target.request_extensions() == {"sni_hostname": "news.example.test"}


def test_ipv6_targets_get_brackets_in_the_request_url() -> None:
    answers = ["2606:4700::6810:84e5", "93.184.215.14", "2606:4700::6810:84e5"]
    target = check("http://v6.test/x", table={"v6.test": answers})
    assert target.addresses == ("2606:4700::6810:84e5", "93.184.215.14")
    assert str(target.request_url(target.addresses[0])) == "http://[2606:4700::6810:84e5]/x"
    assert target.request_extensions() == {}


def test_allowed_host_may_be_loopback() -> None:
    target = check("http://allowed.test:9/", allow=frozenset({"allowed.test"}), table={"allowed.test": ["127.0.0.1"]})
    assert target.addresses == ("127.0.0.1",)


def test_allowed_ip_literal_matches_by_address_not_spelling() -> None:
    assert check("http://[0:0::1]:9/", allow=frozenset({"::1"})).addresses == ("::1",)
    assert check("http://127.0.0.1:9/", allow=frozenset({"127.0.0.1"})).addresses == ("127.0.0.1",)


def test_allowing_an_address_does_not_allow_names_that_resolve_to_it() -> None:
    error = refusal("http://evil.test/", allow=frozenset({"127.0.0.1"}), table={"evil.test": ["127.0.0.1"]})
    assert error.status == "blocked"


def test_allowing_a_name_does_not_allow_its_address_spelled_out() -> None:
    error = refusal("http://127.0.0.1/", allow=frozenset({"allowed.test"}))
    assert error.status == "blocked"


def test_system_resolver_reads_literals_without_the_network() -> None:
    assert "127.0.0.1" in asyncio.run(guard.system_resolver("127.0.0.1", 80))


private_v4 = st.one_of(
    st.integers(0x0A000000, 0x0AFFFFFF),  # 10/8
    st.integers(0x7F000000, 0x7FFFFFFF),  # 127/8
    st.integers(0xA9FE0000, 0xA9FEFFFF),  # 169.254/16
    st.integers(0xAC100000, 0xAC1FFFFF),  # 172.16/12
    st.integers(0xC0A80000, 0xC0A8FFFF),  # 192.168/16
).map(ipaddress.IPv4Address)


@given(private_v4)
def test_every_private_ipv4_address_is_refused_in_any_spelling(ip: ipaddress.IPv4Address) -> None:
    for spelling in (str(ip), str(int(ip)), hex(int(ip)), f"[::ffff:{ip}]"):
        assert refusal(f"http://{spelling}/").status == "blocked"


def test_vet_host_gives_every_checked_address_once_and_refuses_a_private_one_among_them() -> None:
    table: dict[str, Sequence[str]] = {"ok.test": ["93.184.215.14", "93.184.215.14", "2606:4700::6810:84e5"],
                                       "mixed.test": ["93.184.215.14", "10.0.0.7"]}
    resolver = fixed_resolver(table)
    vetted = asyncio.run(guard.vet_host("OK.test.", 443, allow_hosts=frozenset(), resolver=resolver))
    assert vetted == ("93.184.215.14", "2606:4700::6810:84e5")
    with pytest.raises(FetchError, match=r"mixed\.test resolves to 10\.0\.0\.7, which is a private address"):
        asyncio.run(guard.vet_host("mixed.test", 443, allow_hosts=frozenset(), resolver=resolver))
    allowed = asyncio.run(guard.vet_host("mixed.test", 443, allow_hosts=frozenset({"mixed.test"}), resolver=resolver))
    assert allowed == ("93.184.215.14", "10.0.0.7")


def test_vet_host_reads_ip_literals_without_resolving() -> None:
    with pytest.raises(FetchError, match="loopback"):
        asyncio.run(guard.vet_host("[::1]", 80, allow_hosts=frozenset(), resolver=fixed_resolver({})))
    assert asyncio.run(guard.vet_host("::1", 80, allow_hosts=frozenset({"::1"}), resolver=fixed_resolver({}))) == (
        "::1",)


def test_check_url_form_checks_what_the_url_shows_and_resolves_nothing() -> None:
    target = guard.check_url_form("https://Example.test/a", allow_hosts=frozenset())
    assert (target.host, target.addresses) == ("example.test", ())
    with pytest.raises(FetchError, match="loopback"):
        guard.check_url_form("http://0x7f.1/admin", allow_hosts=frozenset())
    with pytest.raises(FetchError, match="only http and https"):
        guard.check_url_form("file:///etc/passwd", allow_hosts=frozenset())


def test_behind_a_proxy_a_name_that_does_not_resolve_here_passes_but_a_private_answer_does_not() -> None:
    resolver = fixed_resolver({"intranet.test": ["192.168.1.5"]})
    passed = asyncio.run(check_url("http://only-the-proxy-knows.test/", allow_hosts=frozenset(), resolver=resolver,
                                   unresolved_ok=True))
    assert passed.addresses == ()
    with pytest.raises(FetchError, match="private"):
        asyncio.run(check_url("http://intranet.test/", allow_hosts=frozenset(), resolver=resolver, unresolved_ok=True))
