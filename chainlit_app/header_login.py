"""Login from a trusted header set by an SSO proxy (``AGENT_MEMORY_UI_HEADER_AUTH=1``), beside password login.

Chainlit's login page posts to ``/auth/header`` whenever header login is configured and nobody is logged in
yet. Chainlit answers 401 when the callback finds no user, and its client answers any 401 by loading
``/login`` again, wherever the page is by then. A password user who reaches the app directly (not through
the proxy) therefore gets thrown back to the login page whenever that request is answered after their
password login: the chat they started disappears, and the new login page fires the request again. So when
the trusted header is missing, :func:`mount` answers ``/auth/header`` itself with ``200 {"success": false}``:
the login page shows that header login failed and the password form stays usable; nothing redirects.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import chainlit as cl
from chainlit.server import header_auth as chainlit_header_auth
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

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
