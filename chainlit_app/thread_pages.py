"""``/thread/<id>`` opened directly: a chat that is not the logged-in user's is "not found", as one that never existed.

The same holds for the thread API (``GET /project/thread/<id>`` and its elements): Chainlit answered 401 for
another user's thread and 500 for a missing one, which told whether an id exists; both are now 404.

Chainlit serves its page for any thread id and only then refuses the websocket, which its client shows as
"Could not reach the server": wrong (the server answered) and alarming. This middleware answers a direct load
of a thread page with a plain 404 page when the thread does not exist or belongs to someone else, the same page
in both cases, so it tells nothing about other users' threads. Logged-out requests pass through (Chainlit shows
its login), as do the user's own threads.
"""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable

from chainlit.auth.jwt import decode_jwt
from starlette.types import ASGIApp, Receive, Scope, Send

from chainlit_app.request_limits import app_path
from chainlit_app.sessions import http_token

ThreadOwner = Callable[[str], Awaitable[str | None]]

_THREAD_PAGE = re.compile(r"^/thread/(?P<thread_id>[^/]+)/?$")
# Chainlit's API answered 401 for another user's thread and 500 for a missing one: an oracle for thread ids.
_THREAD_API = re.compile(r"^/project/thread/(?P<thread_id>[^/]+)(?:/element/[^/]+)?/?$")
_API_NOT_FOUND = b'{"detail":"Thread not found"}'
NOT_FOUND_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Chat not found - agent-memory</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;line-height:1.5}</style>
</head><body>
<h1>Chat not found</h1>
<p>There is no chat <code>{thread_id}</code> among yours. It may have been deleted, or the link belongs to
another user's chat.</p>
<p><a href="/">Start a new chat</a></p>
</body></html>
"""


class ForeignThreadPages:
    """ASGI middleware: 404 for a directly loaded ``/thread/<id>`` that the logged-in user does not own."""

    def __init__(self, app: ASGIApp, *, owner: ThreadOwner) -> None:
        self.app = app
        self.owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = app_path(scope)  # under a root_path too: the API's 401-or-500 told which thread ids exist
        page = _THREAD_PAGE.match(path) if scope["type"] == "http" else None
        api = _THREAD_API.match(path) if scope["type"] == "http" else None
        match = page or api
        if match is None or scope.get("method") not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        user = await _logged_in_user(scope)
        thread_id = match["thread_id"]
        if user is None or await self.owner(thread_id) == user:
            await self.app(scope, receive, send)
            return
        if page is not None:
            body, kind = NOT_FOUND_PAGE.replace("{thread_id}", html.escape(thread_id)).encode(), b"text/html"
        else:
            body, kind = _API_NOT_FOUND, b"application/json"
        headers = [(b"content-type", kind + b"; charset=utf-8"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope.get("method") == "GET" else b""})


async def _logged_in_user(scope: Scope) -> str | None:
    token = await http_token(scope)  # as Chainlit reads it; the session guard (outer) dropped a stale one
    if not token:
        return None
    try:
        return str(decode_jwt(token).identifier)
    except Exception:  # not a session we issued: Chainlit sends it to its login
        return None
