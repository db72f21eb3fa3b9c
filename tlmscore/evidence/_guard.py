"""Address guard: decide whether a URL from model output may be fetched, and at which address.

URLs in logged answers come from untrusted model output, so a fetch must not become a way to
reach the machine it runs on or its private network (server-side request forgery). Before every
connection, and again on every redirect hop, `check_url` resolves the host and refuses addresses
that are loopback, private, link-local (169.254.169.254 included), multicast, reserved,
unspecified or otherwise not globally routable, including IPv4 addresses hidden inside IPv6 forms
(IPv4-mapped, 6to4, Teredo, NAT64) and the legacy IPv4 spellings a resolver accepts
(`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`). Only `http` and `https` are fetched.

Hosts in `Settings.allow_hosts` are trusted as named: any address is accepted for them, which is
how a local test server or an intranet mirror is reached on purpose. The check is on the host as
written in the URL, so allowing `127.0.0.1` does not allow a public name that resolves to it.

The fetcher's own connections are checked where they are made: `vet_host` resolves a host once,
refuses it unless every address passes, and the network backend connects to exactly those
addresses, so a DNS answer that changes between check and connect (DNS rebinding) cannot slip
through. `check_url` does the same for a whole URL (a caller's own client is sent to the checked
address), and `check_url_form` checks what a URL shows without resolving it (scheme, host, IP
literals), which is all the fetcher can check per hop before a pooled connection is reused.
Resolution goes through a `Resolver`, a seam tests use to map made-up names to local addresses.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass

import httpx

from tlmscore.errors import FetchError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Maps `(host, port)` to the IP addresses (as strings) a connection could go to."""

_SCHEMES = frozenset({"http", "https"})
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_PORTS = 65536


@dataclass(frozen=True)
class Target:
    """A URL that passed the guard, with the addresses (all checked) it may be fetched from."""

    url: httpx.URL
    host: str
    addresses: tuple[str, ...]

    def request_url(self, address: str) -> httpx.URL:
        """Return the URL to send: the same path and query, with a checked address as its host."""
        return self.url.copy_with(host=address)

    def request_headers(self) -> dict[str, str]:
        """Return the `Host` header naming the host as written, so virtual hosting still works."""
        return {"Host": self.url.netloc.decode("ascii")}

    def request_extensions(self) -> dict[str, str]:
        """Return, for https, the TLS server name to send and verify the certificate against."""
        return {"sni_hostname": self.host} if self.url.scheme == "https" else {}


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve `host` with the operating system's resolver, without blocking the event loop."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def parse_ip_literal(host: str) -> IPAddress | None:
    """Return the address `host` spells, if it is an IP literal in any form a resolver accepts.

    Besides the standard forms this reads the legacy IPv4 spellings that `inet_aton` (and so
    `getaddrinfo`) accepts: a single decimal number, octal and hex parts, and short forms.
    """
    text = host.strip("[]")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if not text or not all(c.isalnum() or c == "." for c in text):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """Return the IPv4 address an IPv6 address carries (mapped, 6to4, Teredo, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_problem(ip: IPAddress) -> str | None:
    """Say why `ip` must not be fetched from (e.g. "a loopback address"); None when it is public."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            problem = address_problem(inner)
            return f"{problem} inside an IPv6 address" if problem else None
        if ip.is_site_local:
            return "a site-local address"
    checks = (
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_reserved, "a reserved address"),
        (ip.is_private, "a private address"),
        (not ip.is_global, "not a globally routable address"),
    )
    return next((reason for failed, reason in checks if failed), None)


def _is_allowed(url: httpx.URL, host: str, literal: IPAddress | None, allow_hosts: Collection[str]) -> bool:
    """Tell whether the host as written is in `allow_hosts`.

    Names match in their ASCII (IDNA) or Unicode spelling; IP literals are compared as addresses.
    """
    if host in allow_hosts or url.host.lower().rstrip(".") in allow_hosts:
        return True
    if literal is None:
        return False
    return any(parse_ip_literal(entry) == literal for entry in allow_hosts)


def _parse(url: str) -> tuple[httpx.URL, str]:
    """Parse `url` and return it with its lower-cased ASCII host; refuse what cannot be fetched."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
        raise FetchError("blocked", f"not a valid URL ({exc})") from None
    if parsed.scheme not in _SCHEMES:
        shown = f"{parsed.scheme}:" if parsed.scheme else "a relative URL"
        raise FetchError("blocked", f"only http and https URLs are fetched, not {shown}")
    host = parsed.raw_host.decode("ascii", "replace").lower().rstrip(".")
    if not host:
        raise FetchError("blocked", "not a valid URL (it names no host)")
    if not (_HOST_NAME.fullmatch(host) or ":" in host):
        raise FetchError("blocked", f"not a valid URL (bad host name {host!r})")
    if parsed.port is not None and not 0 < parsed.port < _PORTS:
        raise FetchError("blocked", f"not a valid URL (port {parsed.port} is out of range)")
    return parsed, host


async def _addresses(host: str, port: int, resolver: Resolver) -> list[IPAddress]:
    """Resolve `host` to addresses; a resolver failure becomes a `dns_error`."""
    try:
        answers = await resolver(host, port)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise FetchError("dns_error", f"could not resolve {host} ({reason})") from None
    addresses = [ip for ip in (parse_ip_literal(a.split("%", 1)[0]) for a in answers) if ip is not None]
    if not addresses:
        raise FetchError("dns_error", f"could not resolve {host} (no addresses)")
    return addresses


def _vetted(url: httpx.URL, host: str, literal: IPAddress | None, addresses: Sequence[IPAddress],
            allow_hosts: Collection[str]) -> tuple[str, ...]:
    """The distinct `addresses`, in order, if they may be used for `host`.

    Unless `allow_hosts` names the host, raise a `blocked` FetchError naming the first address
    that must not be fetched from.
    """
    if not _is_allowed(url, host, literal, allow_hosts):
        for ip in addresses:
            problem = address_problem(ip)
            if problem is not None:
                named = f"{host} resolves to {ip}, which is" if literal is None else f"{ip} is"
                raise FetchError("blocked", f"refused: {named} {problem}")
    return tuple(dict.fromkeys(str(ip) for ip in addresses))


async def check_url(
    url: str, *, allow_hosts: Collection[str], resolver: Resolver, unresolved_ok: bool = False
) -> Target:
    """Check `url` and resolve its host; return the addresses to connect to, in the resolver's order.

    Raises `FetchError` with status `blocked` (bad scheme, bad URL, refused address) or
    `dns_error` (the name does not resolve). Every address a name resolves to must pass, so a
    name cannot smuggle a private address in beside a public one. With `unresolved_ok` (behind a
    proxy, which resolves names itself) a name that does not resolve here passes with no address.
    """
    parsed, host = _parse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    literal = parse_ip_literal(host)
    if literal is not None:
        addresses: list[IPAddress] = [literal]
    else:
        try:
            addresses = await _addresses(host, port, resolver)
        except FetchError:
            if not unresolved_ok:
                raise
            addresses = []
    return Target(parsed, host, _vetted(parsed, host, literal, addresses, allow_hosts))


def check_url_form(url: str, *, allow_hosts: Collection[str]) -> Target:
    """Check what `url` shows without resolving it: scheme, host and, for an IP literal, the address.

    The addresses of a name are checked when a connection is made (`vet_host`); the target then
    names no address.
    """
    parsed, host = _parse(url)
    literal = parse_ip_literal(host)
    addresses = [literal] if literal is not None else []
    return Target(parsed, host, _vetted(parsed, host, literal, addresses, allow_hosts))


async def vet_host(host: str, port: int, *, allow_hosts: Collection[str], resolver: Resolver) -> tuple[str, ...]:
    """Resolve `host` (as a URL spells it, in ASCII) once and return its addresses if all may be used.

    This is the check made for each new connection: the caller connects to these addresses and no
    others. Raises `FetchError` (`blocked` or `dns_error`) like `check_url`.
    """
    host = host.strip("[]").lower().rstrip(".")
    literal = parse_ip_literal(host)
    addresses = [literal] if literal is not None else await _addresses(host, port, resolver)
    shown = f"[{host}]" if ":" in host else host
    return _vetted(httpx.URL(f"http://{shown}/"), host, literal, addresses, allow_hosts)
