"""Login from a trusted header set by an SSO proxy (``AGENT_MEMORY_UI_HEADER_AUTH=1``), beside password login.

Chainlit's login page posts to ``/auth/header`` whenever header login is configured and nobody is logged in
yet. Chainlit answers 401 when the callback finds no user, and its client answers any 401 by loading
``/login`` again, wherever the page is by then. A password user who reaches the app directly (not through
the proxy) therefore gets thrown back to the login page whenever that request is answered after their
password login: the chat they started disappears, and the new login page fires the request again. So when
the trusted header is missing, :func:`mount` answers ``/auth/header`` itself with ``200 {"success": false}``:
the login page shows that header login failed and the password form stays usable; nothing redirects.

The header is believed only from the proxy: requests whose TCP peer is not in
``AGENT_MEMORY_UI_TRUSTED_PROXIES`` (comma-separated addresses or networks; empty by default, and loopback is
not trusted unless listed) get the same ``success: false`` answer, so a local process (executed code
included) cannot claim to be anyone by sending the header to 127.0.0.1, nor by naming the proxy in
``X-Forwarded-For`` (uvicorn's rewriting of the peer from that header is off, see :mod:`chainlit_app.peers`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import chainlit as cl
from chainlit.server import header_auth as chainlit_header_auth
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from chainlit_app.peers import TRUSTED_PROXIES_ENV, from_trusted_proxy, trusted_proxies

log = logging.getLogger(__name__)

HEADER_LOGIN_PATH = "/auth/header"
MAX_IDENTIFIER_LENGTH = 255


def trusted_header() -> str:
    """The header the proxy sets (``AGENT_MEMORY_UI_TRUSTED_HEADER``, default ``X-Forwarded-User``)."""
    return os.environ.get("AGENT_MEMORY_UI_TRUSTED_HEADER", "X-Forwarded-User")


def trusted_user(headers: Mapping[str, str], header: str) -> cl.User | None:
    """The user the proxy vouches for, or None when the header is missing, empty or too long.

    Only safe behind a proxy that authenticates users and overwrites this header on every request.
    """
    name = (headers.get(header) or "").strip()
    if not name or len(name) > MAX_IDENTIFIER_LENGTH:
        return None
    return cl.User(identifier=name, metadata={"provider": "header"})


async def _header_login(request: Request) -> Response:
    header = trusted_header()
    peer = request.client.host if request.client else None  # the TCP peer: nothing the client wrote
    if not from_trusted_proxy(peer, trusted_proxies()):
        log.warning("header login refused: %s is not in %s", peer, TRUSTED_PROXIES_ENV)
        return JSONResponse(
            {
                "success": False,
                "detail": f"header login is accepted only from {TRUSTED_PROXIES_ENV}: log in with a password",
            }
        )
    if trusted_user(request.headers, header) is None:
        # Not 401: Chainlit's client would reload /login even after a password login that finished first.
        return JSONResponse({"success": False, "detail": f"no {header} header: log in with a password"})
    response: Response = await chainlit_header_auth(request)
    return response


def mount(app: FastAPI) -> None:
    """Answer ``POST /auth/header`` before Chainlit's own route does (idempotent)."""
    if any(getattr(r, "path", None) == HEADER_LOGIN_PATH and getattr(r, "endpoint", None) is _header_login
           for r in app.router.routes):  # fmt: skip
        return
    app.router.routes.insert(0, APIRoute(HEADER_LOGIN_PATH, _header_login, methods=["POST"]))
