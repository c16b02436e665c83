"""Bounds on what one user can hold open on the shared MCP HTTP server.

The SDK caps sessions for the whole server (10,000) and expires them after 30 idle minutes. One token could
therefore open every session there is and lock every other user out (503) for half an hour. Here a user
(all their tokens together) may hold at most ``AGENT_MEMORY_MCP_MAX_SESSIONS_PER_USER`` open sessions
(default 20); a request that would open one more is answered ``429`` with what to do, one second late (a tarpit:
a client flooding refused requests then gets one answer a second per connection instead of thousands, which cost
every user CPU). Idle sessions end after ``AGENT_MEMORY_MCP_SESSION_IDLE_SECONDS`` (default 600).

Example:
    >>> SessionLimits.from_env({"AGENT_MEMORY_MCP_MAX_SESSIONS_PER_USER": "5"}).per_user
    5
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio

from ..auth import StoreTokenVerifier

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class SessionLimits:
    per_user: int = 20
    idle_seconds: float = 600.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SessionLimits:
        try:
            per_user = int(environ.get("AGENT_MEMORY_MCP_MAX_SESSIONS_PER_USER", "20"))
            idle = float(environ.get("AGENT_MEMORY_MCP_SESSION_IDLE_SECONDS", "600"))
        except ValueError as exc:
            raise ValueError(f"AGENT_MEMORY_MCP_MAX_SESSIONS_PER_USER / _SESSION_IDLE_SECONDS: {exc}") from None
        if per_user < 1 or not idle > 0:
            raise ValueError("AGENT_MEMORY_MCP_MAX_SESSIONS_PER_USER must be >= 1 and _SESSION_IDLE_SECONDS > 0")
        return cls(per_user=per_user, idle_seconds=idle)


class PerUserSessionCap:
    """ASGI middleware: refuse a new MCP session (a POST without ``mcp-session-id``) when the token's user
    already holds ``limits.per_user`` sessions. Existing sessions, and other users, are not affected."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        owners: Callable[[], Mapping[str, Any]],
        verifier: StoreTokenVerifier,
        limit: int,
        tarpit_seconds: float = 1.0,
    ) -> None:
        self.app = app
        self.tarpit_seconds = tarpit_seconds
        self.opening: dict[str | None, tuple[anyio.Lock, int]] = {}
        self.owners = owners  # session id -> the SDK's AuthorizationContext (subject: the user)
        self.verifier = verifier
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "POST":
            headers = {k.lower(): v for k, v in scope.get("headers") or []}
            bearer = headers.get(b"authorization", b"").decode("latin-1")
            if b"mcp-session-id" not in headers and bearer.lower().startswith("bearer "):
                access = await self.verifier.verify_token(bearer[7:].strip())
                if access is not None:
                    await self._open_one(access.subject, scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _open_one(self, user: str | None, scope: Scope, receive: Receive, send: Send) -> None:
        # One new session at a time per user: concurrent requests would otherwise all see room for one more
        # (or count a session twice while it is being registered). Other users do not wait.
        lock, waiting = self.opening.get(user, (anyio.Lock(), 0))
        self.opening[user] = (lock, waiting + 1)
        try:
            async with lock:
                full = self._open_sessions(user) >= self.limit
                if not full:
                    await self.app(scope, receive, send)
            if full:
                await self._refuse(send)  # outside the lock: the tarpit must not hold up the user's next request
        finally:
            lock, waiting = self.opening[user]
            if waiting == 1:
                del self.opening[user]
            else:
                self.opening[user] = (lock, waiting - 1)

    def _open_sessions(self, user: str | None) -> int:
        return sum(1 for owner in list(self.owners().values()) if owner.get("subject") == user)

    async def _refuse(self, send: Send) -> None:
        await anyio.sleep(self.tarpit_seconds)
        body = json.dumps(
            {
                "error": "too_many_sessions",
                "error_description": f"this user already has {self.limit} open MCP sessions: end some (DELETE /mcp "
                "with their mcp-session-id) or wait until idle ones expire",
            }
        ).encode()
        headers = [(b"content-type", b"application/json"), (b"retry-after", b"60")]
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": body})
