"""Revocable UI sessions: a session token is honoured only while its user's session version is unchanged.

Chainlit's session is a signed JWT in a cookie, valid until it expires (15 days by default), whatever happens
to the user. Here each token carries the user's session version (``metadata.sv``, written at login) and
:class:`SessionGuard` checks it on every HTTP request and websocket connection, before Chainlit sees them:

- logout (``POST /logout``) bumps the version, so that token and every other token of the user stop working
  (logout ends the user's sessions everywhere);
- a password change (``agent-memory user passwd``) and removing the login bump it too;
- deleting the user (``agent-memory user delete`` / ``forget-user``) removes the user: no version, no session.

The guard finds tokens with Chainlit's own readers (:func:`tokens_chainlit_reads`): its HTTP routes' cookie
or bearer header and its socket's cookie, whatever the rest of the ``Cookie`` header holds. A stale token is
not refused outright: it is removed from the request, so Chainlit treats the request as anonymous (the login
page still loads; everything that needs a user answers 401 and the client shows the login).

A session cannot be renewed: Chainlit's ``POST /auth/jwt`` (a fresh token for any live one, used only by its
embeddable copilot) answers 404, so ``AGENT_MEMORY_UI_SESSION_HOURS`` (default 168 hours, one week) bounds
every session. The chat socket (``/ws/socket.io``) refuses requests whose ``Origin`` is neither the UI's own
(scheme, host and port of the request) nor listed in ``AGENT_MEMORY_UI_ALLOWED_ORIGINS``: a page on another
port of the same host is same-site, so the browser sends it the session cookie, and Chainlit's socket server
checks no origin.

Example:
    >>> session_lifetime_seconds({"AGENT_MEMORY_UI_SESSION_HOURS": "12"})
    43200
    >>> allowed_origins({"AGENT_MEMORY_UI_ALLOWED_ORIGINS": "https://chat.example.com"})
    {('https', 'chat.example.com', 443)}
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from chainlit.auth import reuseable_oauth
from chainlit.auth.cookie import _auth_cookie_name
from chainlit.auth.jwt import decode_jwt
from chainlit.socket import _get_token as socket_token
from engineio.async_drivers.asgi import translate_request
from jwt import InvalidTokenError
from starlette.requests import Request

from chainlit_app.request_limits import answer, app_path

log = logging.getLogger(__name__)

SESSION_HOURS_ENV = "AGENT_MEMORY_UI_SESSION_HOURS"
ALLOWED_ORIGINS_ENV = "AGENT_MEMORY_UI_ALLOWED_ORIGINS"
DEFAULT_SESSION_HOURS = 168
VERSION_KEY = "sv"
SOCKET_PATH = "/ws/socket.io"
RENEWAL_PATH = "/auth/jwt"
DEFAULT_PORTS = {"http": 80, "https": 443}

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
VersionLookup = Callable[[str], Awaitable[int | None]]
EndSessions = Callable[[str], Awaitable[int | None]]
Origin = tuple[str, str, int]


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


def origin_of(url: str) -> Origin | None:
    """``(scheme, host, port)`` of an ``http(s)://host[:port]`` origin; None for anything else (``null``)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") or parts.query:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return scheme, parts.hostname, port or DEFAULT_PORTS[scheme]


def allowed_origins(environ: Mapping[str, str]) -> set[Origin]:
    """Origins besides the UI's own whose pages may open the chat socket (``AGENT_MEMORY_UI_ALLOWED_ORIGINS``)."""
    origins: set[Origin] = set()
    for part in environ.get(ALLOWED_ORIGINS_ENV, "").split(","):
        if part.strip():
            origin = origin_of(part)
            if origin is None:
                raise ValueError(f"{ALLOWED_ORIGINS_ENV}: {part.strip()!r} is not an origin like https://host[:port]")
            origins.add(origin)
    return origins


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def own_origin(scope: Scope) -> Origin | None:
    """The origin a page of this UI has, as the request reached it (its Host header and scheme)."""
    scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme", "http"))
    host = _header(scope, b"host")
    return origin_of(f"{scheme}://{host}") if host else None


async def _connect_event() -> MutableMapping[str, Any]:
    return {"type": "websocket.connect"}


async def _no_send(message: MutableMapping[str, Any]) -> None:
    raise RuntimeError("reading a request's headers sends nothing")


async def tokens_chainlit_reads(scope: Scope) -> set[str]:
    """Every session token Chainlit would take from this request, read by Chainlit's own code.

    Its HTTP routes read starlette's lenient cookie parse of every ``Cookie`` header (chunked cookies
    included), else an ``Authorization: Bearer`` header; its socket reads the ``Cookie`` headers as
    engine.io joins them into ``HTTP_COOKIE``. The readings can differ (engine.io skips a header that is not
    UTF-8, starlette does not), so the guard checks each one.
    """
    tokens = {await http_token(scope), socket_token(await translate_request(scope, _connect_event, _no_send))}
    return {token for token in tokens if token}


def _without_credentials(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers minus the session: no Authorization, and no auth cookie (chunked ones included).

    A cookie goes when its name holds the auth cookie's name anywhere: every parser reads names from the
    same bytes, but trims different whitespace (starlette's str.strip() removes a latin-1 \\xa0, for one).
    """
    name = _auth_cookie_name.encode()
    kept: list[tuple[bytes, bytes]] = []
    for key, value in headers:
        lower = key.lower()
        if lower == b"authorization":
            continue
        if lower == b"cookie":
            parts = [p for p in value.split(b";") if name not in p.partition(b"=")[0]]
            if parts:
                kept.append((key, b";".join(parts)))
            continue
        kept.append((key, value))
    return kept


class SessionGuard:
    """ASGI middleware: drop session tokens whose user's session version has changed; end sessions on logout;
    refuse session renewal and the chat socket from foreign origins."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        versions: VersionLookup,
        end_sessions: EndSessions,
        origins: set[Origin] | frozenset[Origin] = frozenset(),
    ) -> None:
        self.app = app
        self.versions = versions
        self.end_sessions = end_sessions
        self.origins = origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = app_path(scope)
        if path == RENEWAL_PATH and scope["type"] == "http":
            await answer(send, 404, "Not Found")  # a fresh token for a live one would outlive the session
            return
        if (path == SOCKET_PATH or path.startswith(SOCKET_PATH + "/")) and not self._origin_allowed(scope):
            log.warning("chat socket refused for origin %r", _header(scope, b"origin"))
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})  # before accepting: the server answers 403
            else:
                await answer(send, 403, "this origin may not open the chat socket")
            return
        await self.app(await self._checked(scope), receive, send)

    def _origin_allowed(self, scope: Scope) -> bool:
        # JSONP polling (?j=N) answers as a script a page on any site could include, with the user's cookie and
        # no Origin header: the browser client never uses it.
        if any(key == b"j" for key, _ in urllib.parse.parse_qsl(scope.get("query_string", b""))):
            return False
        origin = _header(scope, b"origin")
        if origin is None:  # not sent by a browser page (Origin is always sent on a websocket from one)
            return True
        claimed = origin_of(origin)
        return claimed is not None and (claimed == own_origin(scope) or claimed in self.origins)

    async def _checked(self, scope: Scope) -> Scope:
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or [])
        users: set[str] = set()
        for token in await tokens_chainlit_reads(scope):
            try:
                user = decode_jwt(token)
            except InvalidTokenError:
                continue  # Chainlit refuses it itself
            except Exception:  # a token that decodes to something unexpected: never trust it
                return {**scope, "headers": _without_credentials(headers)}
            carried = (user.metadata or {}).get(VERSION_KEY)
            current = await self.versions(user.identifier)
            if current is None or carried != current:
                return {**scope, "headers": _without_credentials(headers)}
            users.add(user.identifier)
        if scope["type"] == "http" and scope.get("method") == "POST" and app_path(scope) == "/logout":
            for identifier in users:
                await self.end_sessions(identifier)
                log.info("logout: ended every session of %s", identifier)
        return scope


async def http_token(scope: Scope) -> str | None:
    """The token Chainlit's HTTP routes would take from this request (cookie, else bearer header)."""
    token: str | None = await reuseable_oauth(Request({**scope, "type": "http"}))
    return token or None
