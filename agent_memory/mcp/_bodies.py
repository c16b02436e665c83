"""Request bodies that are not UTF-8, or nested too deeply to parse, are a 400 parse error, as any other
malformed JSON-RPC body.

The SDK parses the body with ``json.loads``, which guesses UTF-16 or UTF-32 from the first bytes and then raises
``UnicodeDecodeError``; the SDK catches only ``JSONDecodeError`` for its 400, so such a body got a 500 and a
traceback in the log. JSON over HTTP is UTF-8 (RFC 8259), so anything else is refused here, before the SDK; so is
valid JSON nested thousands deep (``[[[...]]]``), where ``json.loads`` raises ``RecursionError``, another 500.
Only requests of an authenticated user are read: others get the SDK's 401 without their body being buffered.
"""

from __future__ import annotations

import json

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.responses import JSONResponse

from ._limits import ASGIApp, Message, Receive, Scope, Send

PARSE_ERROR = -32700  # JSON-RPC
INVALID_REQUEST = -32600


class Utf8BodyGuard:
    """Innermost Starlette middleware (after authentication) for POST bodies: a bigger one than ``max_bytes``
    gets a 413 that says what to do instead."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or not isinstance(scope.get("user"), AuthenticatedUser)
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes or not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if size > self.max_bytes:
            limit = self.max_bytes // 2**20
            advice = (
                f"Request body over {limit} MiB: as JSON, content takes up to six bytes per character (a control "
                "character is \\u001b), so store content this large with the CLI (agent-memory store FILE)"
            )
            error = {"code": INVALID_REQUEST, "message": advice}
            await JSONResponse({"jsonrpc": "2.0", "id": "server-error", "error": error}, status_code=413)(
                scope, receive, send
            )
            return
        problem = _unparseable(body)
        if problem is not None:
            error = {"code": PARSE_ERROR, "message": f"Parse error: {problem}"}
            await JSONResponse({"jsonrpc": "2.0", "id": "server-error", "error": error}, status_code=400)(
                scope, receive, send
            )
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _unparseable(body: bytes) -> str | None:
    """Why the SDK's parser would fail with a server error on ``body`` (None: it parses, or fails cleanly)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the body is not UTF-8 ({exc.reason} at byte {exc.start})"
    try:
        json.loads(text)
    except RecursionError:  # valid JSON nested deeper than Python's parser goes
        return "the body is nested too deeply"
    except ValueError:  # malformed: the SDK answers it with its own 400
        pass
    return None
