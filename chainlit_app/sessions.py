"""Revocable UI sessions: a session token is honoured only while its user's session version is unchanged.

Chainlit's session is a signed JWT in a cookie, valid until it expires (15 days by default), whatever happens
to the user. Here each token carries the user's session version (``metadata.sv``, written at login) and
:class:`SessionGuard` checks it on every HTTP request and websocket connection, before Chainlit sees them:

- logout (``POST /logout``) bumps the version, so that token and every other token of the user stop working
  (logout ends the user's sessions everywhere);
- a password change (``agent-memory user passwd``) and removing the login bump it too;
- deleting the user (``agent-memory user delete`` / ``forget-user``) removes the user: no version, no session.

A stale token is not refused outright: it is removed from the request, so Chainlit treats the request as
anonymous (the login page still loads; everything that needs a user answers 401 and the client shows the
login). ``AGENT_MEMORY_UI_SESSION_HOURS`` sets how long a session lasts (default 168 hours, one week).

Example:
    >>> session_lifetime_seconds({"AGENT_MEMORY_UI_SESSION_HOURS": "12"})
    43200
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any

from chainlit.auth.cookie import get_token_from_cookies
from chainlit.auth.jwt import decode_jwt
from jwt import InvalidTokenError

log = logging.getLogger(__name__)

SESSION_HOURS_ENV = "AGENT_MEMORY_UI_SESSION_HOURS"
DEFAULT_SESSION_HOURS = 168
VERSION_KEY = "sv"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
VersionLookup = Callable[[str], Awaitable[int | None]]
EndSessions = Callable[[str], Awaitable[int | None]]


def session_lifetime_seconds(environ: Mapping[str, str]) -> int:
    """How long a UI session lasts, from ``AGENT_MEMORY_UI_SESSION_HOURS`` (a positive number of hours)."""
    raw = environ.get(SESSION_HOURS_ENV, "").strip()
    if not raw:
        return DEFAULT_SESSION_HOURS * 3600
    try:
        hours = float(raw)
    except ValueError:
        hours = -1
    if not 0 < hours <= 24 * 366:
        raise ValueError(f"{SESSION_HOURS_ENV}={raw!r}: give a number of hours between 0 and 8784")
    return int(hours * 3600)


def cookies_of(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    jar: dict[str, str] = {}
    for name, value in headers:
        if name.lower() == b"cookie":
            try:
                parsed: SimpleCookie = SimpleCookie(value.decode("latin-1"))
            except CookieError:
                continue
            jar.update({key: morsel.value for key, morsel in parsed.items()})
    return jar


def _bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def _without_credentials(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers minus the session: no Authorization, and no auth cookie (chunked ones included)."""
    kept: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        lower = name.lower()
        if lower == b"authorization":
            continue
        if lower == b"cookie":
            parts = [p for p in value.split(b";") if not p.strip().startswith(b"access_token")]
            if parts:
                kept.append((name, b";".join(parts)))
            continue
        kept.append((name, value))
    return kept


class SessionGuard:
    """ASGI middleware: drop session tokens whose user's session version has changed; end sessions on logout."""

    def __init__(self, app: ASGIApp, *, versions: VersionLookup, end_sessions: EndSessions) -> None:
        self.app = app
        self.versions = versions
        self.end_sessions = end_sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = await self._checked(scope)
        await self.app(scope, receive, send)

    async def _checked(self, scope: Scope) -> Scope:
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or [])
        token = get_token_from_cookies(cookies_of(headers)) or _bearer(headers)
        if not token:
            return scope
        try:
            user = decode_jwt(token)
        except InvalidTokenError:
            return scope  # Chainlit refuses it itself
        except Exception:  # a token that decodes to something unexpected: never trust it
            return {**scope, "headers": _without_credentials(headers)}
        carried = (user.metadata or {}).get(VERSION_KEY)
        current = await self.versions(user.identifier)
        if current is None or carried != current:
            return {**scope, "headers": _without_credentials(headers)}
        if scope["type"] == "http" and scope.get("method") == "POST" and str(scope.get("path", "")).endswith("/logout"):
            await self.end_sessions(user.identifier)
            log.info("logout: ended every session of %s", user.identifier)
        return scope
