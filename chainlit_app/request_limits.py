"""Request bodies the UI refuses before reading them.

Chainlit reads a body before looking at who sent it or whether the route is on: ``POST /project/file`` parses
the whole upload (spooled to a temporary file) and then reads it into memory before it checks that uploads
are enabled, and ``POST /login`` (like FastAPI's form parsing everywhere) spools every part of a multipart
body to disk before the password is looked at. :class:`RequestLimits` answers first:

- ``/project/file`` answers 403 while ``[features.spontaneous_file_upload]`` is not enabled in Chainlit's
  ``config.toml`` (``chainlit_app/config.toml`` disables it; the app asks for no files either, which would
  use the same route);
- request bodies answer 413 past their bound, at once when ``Content-Length`` says so, else as soon as the
  streamed bytes pass it: the routes anyone may call before logging in (:data:`BODY_LIMITS`), every other
  route (:data:`DEFAULT_BODY_LIMIT`: FastAPI parses a body before it checks the session), and uploads when
  they are on (Chainlit's ``max_size_mb``).

Example:
    >>> BODY_LIMITS["/login"]
    65536
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from chainlit.config import config as chainlit_config

UPLOAD_PATH = "/project/file"
# A login form holds a user name and a password of at most 1,024 characters; the sticky-session cookie
# Chainlit's client sets before opening its socket is a session id.
BODY_LIMITS = {"/login": 64 * 1024, "/set-session-cookie": 4 * 1024}
# Every other route: FastAPI reads and parses a JSON body before it checks the session, so without a bound
# anyone could make the UI hold hundreds of MB (PUT /feedback with 400 MB: 134 -> 935 MB). The UI's own JSON
# (feedback, thread lists, actions, elements) is a few kilobytes; chat messages come over the socket.
DEFAULT_BODY_LIMIT = 1024 * 1024

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def answer(send: Send, status: int, detail: str) -> None:
    """A complete JSON response ``{"detail": ...}``, as FastAPI words its errors."""
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def app_path(scope: Scope) -> str:
    """The request's path as the app's routes see it: without Chainlit's ``root_path`` prefix."""
    path = str(scope.get("path", ""))
    root = chainlit_config.run.root_path or ""
    return path[len(root) :] if root and path.startswith(root) else path


def uploads_enabled() -> bool:
    """Whether Chainlit's config lets users upload files with their messages."""
    spec = chainlit_config.features.spontaneous_file_upload
    return bool(spec is not None and spec.enabled)


def upload_limit() -> int:
    """Bytes an upload may have when uploads are on: Chainlit's ``max_size_mb``, plus room for the form."""
    spec = chainlit_config.features.spontaneous_file_upload
    return int((getattr(spec, "max_size_mb", None) or 500) * 1024 * 1024) + 64 * 1024


class _TooLarge(Exception):
    pass


class RequestLimits:
    """ASGI middleware: refuse disabled uploads and oversized bodies, unread."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        uploads: Callable[[], bool] = uploads_enabled,
        limits: dict[str, int] | None = None,
        default_limit: int = DEFAULT_BODY_LIMIT,
    ) -> None:
        self.app = app
        self.uploads = uploads
        self.limits = BODY_LIMITS if limits is None else limits
        self.default_limit = default_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = app_path(scope)
        if path == UPLOAD_PATH and not self.uploads():
            await answer(send, 403, "file uploads are disabled")
            return
        limit = self.limits.get(path, self.default_limit if path != UPLOAD_PATH else upload_limit())
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await answer(send, 413, f"request body over {limit} bytes")
            return
        await self._bounded(scope, receive, send, limit)

    async def _bounded(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """The app with a receive that stops at ``limit`` bytes (bodies sent without a length, chunked)."""
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except _TooLarge:
            if started:
                raise
            await answer(send, 413, f"request body over {limit} bytes")


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == b"content-length":
            text = bytes(value).decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None
