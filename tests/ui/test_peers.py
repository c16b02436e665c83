"""Which address a request comes from: the TCP peer, unless it is a trusted proxy naming the client."""

from __future__ import annotations

import os
from typing import Any

import pytest
import uvicorn
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from chainlit_app.peers import client_address, from_trusted_proxy, keep_the_tcp_peer, trusted_proxies

PROXIES = trusted_proxies({"AGENT_MEMORY_UI_TRUSTED_PROXIES": "10.0.0.5, 10.1.0.0/16"})


def test_x_forwarded_for_from_a_peer_that_is_no_trusted_proxy_is_ignored() -> None:
    assert client_address("127.0.0.1", ["10.0.0.5"], PROXIES) == "127.0.0.1"


def test_behind_a_trusted_proxy_the_right_most_address_it_does_not_trust_is_the_client() -> None:
    # The client wrote "1.1.1.1"; the proxy at 10.1.0.9 appended 203.0.113.7, the one at 10.0.0.5 appended 10.1.0.9.
    assert client_address("10.0.0.5", ["1.1.1.1, 203.0.113.7", "10.1.0.9"], PROXIES) == "203.0.113.7"


def test_without_x_forwarded_for_the_proxy_itself_is_the_client() -> None:
    assert client_address("10.0.0.5", [], PROXIES) == "10.0.0.5"


def test_when_every_hop_is_a_trusted_proxy_the_first_one_is_the_client() -> None:
    assert client_address("10.0.0.5", ["10.1.0.1, 10.1.0.2"], PROXIES) == "10.1.0.1"


def test_an_entry_that_is_no_address_stops_at_the_proxy_that_wrote_it() -> None:
    assert client_address("10.0.0.5", ["203.0.113.7, unknown, 10.1.0.2"], PROXIES) == "10.1.0.2"


@pytest.mark.parametrize(
    ("entry", "client"),
    [("203.0.113.7:5555", "203.0.113.7"), ("[2001:db8::7]:443", "2001:db8::7"), ("2001:DB8:0::7", "2001:db8::7")],
)
def test_ports_brackets_and_spellings_of_an_address_count_as_that_address(entry: str, client: str) -> None:
    assert client_address("10.0.0.5", [entry], PROXIES) == client


def test_a_dual_stack_peer_spelling_of_a_trusted_ipv4_proxy_is_trusted() -> None:
    assert from_trusted_proxy("::ffff:10.0.0.5", PROXIES)
    assert not from_trusted_proxy("::ffff:10.0.0.6", PROXIES)


def test_a_bad_trusted_proxy_is_refused_with_the_variable_named() -> None:
    with pytest.raises(ValueError, match="AGENT_MEMORY_UI_TRUSTED_PROXIES"):
        trusted_proxies({"AGENT_MEMORY_UI_TRUSTED_PROXIES": "proxy.example"})


async def test_uvicorn_then_keeps_the_tcp_peer_of_a_request_from_loopback_naming_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "127.0.0.1")  # what uvicorn trusts by default
    keep_the_tcp_peer(os.environ)
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.update(scope)

    config = uvicorn.Config(app)  # as Chainlit builds it: proxy headers on, trusted hosts from the environment
    middleware = ProxyHeadersMiddleware(app, trusted_hosts=config.forwarded_allow_ips)
    scope = {"type": "http", "client": ("127.0.0.1", 40000), "headers": [(b"x-forwarded-for", b"10.0.0.5")]}
    await middleware(scope, None, None)
    assert seen["client"] == ("127.0.0.1", 40000)
