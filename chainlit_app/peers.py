"""Who a request comes from: the TCP peer, and behind a trusted proxy the client it names in ``X-Forwarded-For``.

Uvicorn (which Chainlit starts) would replace the peer address with the ``X-Forwarded-For`` value of any request
from ``FORWARDED_ALLOW_IPS`` (by default 127.0.0.1): every local process could then pose as the SSO proxy, or
as any client address the login throttle counts. So the app runs uvicorn with that rewriting off
(:func:`keep_the_tcp_peer`), ``request.client`` is the TCP peer, and the proxies believed are ours to name:
``AGENT_MEMORY_UI_TRUSTED_PROXIES`` (comma-separated addresses or networks; empty by default, loopback
included only when listed).

Example:
    >>> proxies = trusted_proxies({"AGENT_MEMORY_UI_TRUSTED_PROXIES": "10.0.0.5"})
    >>> client_address("10.0.0.5", ["1.2.3.4, 203.0.113.7"], proxies)  # the proxy appended 203.0.113.7
    '203.0.113.7'
    >>> client_address("127.0.0.1", ["203.0.113.7"], proxies)  # not the proxy: its header means nothing
    '127.0.0.1'
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping, MutableMapping, Sequence

TRUSTED_PROXIES_ENV = "AGENT_MEMORY_UI_TRUSTED_PROXIES"
UVICORN_FORWARDED_ENV = "FORWARDED_ALLOW_IPS"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def keep_the_tcp_peer(environ: MutableMapping[str, str]) -> None:
    """Make uvicorn believe nobody's ``X-Forwarded-For``: ``request.client`` stays the TCP peer.

    Uvicorn reads ``FORWARDED_ALLOW_IPS`` when its config is built; ``""`` matches no address.
    """
    environ[UVICORN_FORWARDED_ENV] = ""


def trusted_proxies(environ: Mapping[str, str] | None = None) -> list[Network]:
    """The proxies named in ``AGENT_MEMORY_UI_TRUSTED_PROXIES``.

    >>> [str(n) for n in trusted_proxies({"AGENT_MEMORY_UI_TRUSTED_PROXIES": "10.0.0.5, 192.168.1.0/24"})]
    ['10.0.0.5/32', '192.168.1.0/24']
    """
    raw = (environ if environ is not None else os.environ).get(TRUSTED_PROXIES_ENV, "")
    networks: list[Network] = []
    for part in raw.split(","):
        if part.strip():
            try:
                networks.append(ipaddress.ip_network(part.strip(), strict=False))
            except ValueError as exc:
                raise ValueError(f"{TRUSTED_PROXIES_ENV}: {part.strip()!r} is not an address or network") from exc
    return networks


def parse_address(text: str | None) -> Address | None:
    """An address as a peer or an ``X-Forwarded-For`` entry writes it (a port or IPv6 brackets allowed), else None.

    >>> str(parse_address("[2001:db8::1]:443")), str(parse_address("::ffff:10.0.0.5")), parse_address("unknown")
    ('2001:db8::1', '10.0.0.5', None)
    """
    text = (text or "").strip()
    if text.startswith("[") and "]" in text:
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # a dual-stack socket's spelling of an IPv4 peer
    return ip


def from_trusted_proxy(address: str | None, proxies: Sequence[Network]) -> bool:
    """True when the peer ``address`` is one of ``proxies``."""
    ip = parse_address(address)
    return ip is not None and any(ip in network for network in proxies)


def client_address(peer: str | None, forwarded_for: Iterable[str], proxies: Sequence[Network]) -> str:
    """The address a request comes from: the TCP ``peer``, or, when that is a trusted proxy, the right-most
    ``X-Forwarded-For`` entry that is not one.

    Each proxy appends the address it was connected from, so entries left of the first untrusted one (from the
    right) are whatever the client wrote. An entry that is no address stops the walk at the proxy that wrote it.
    """
    parsed = parse_address(peer)
    address = str(parsed) if parsed is not None else peer or "unknown"
    if not from_trusted_proxy(peer, proxies):
        return address
    hops = [hop for value in forwarded_for for hop in value.split(",") if hop.strip()]
    for hop in reversed(hops):
        ip = parse_address(hop)
        if ip is None:
            break
        address = str(ip)
        if not any(ip in network for network in proxies):
            break
    return address
