"""Request bodies that are not UTF-8 are a 400 parse error, as any other malformed JSON-RPC body.

The SDK parses the body with ``json.loads``, which guesses UTF-16 or UTF-32 from the first bytes and then raises
``UnicodeDecodeError``; the SDK catches only ``JSONDecodeError`` for its 400, so such a body got a 500 and a
traceback in the log. JSON over HTTP is UTF-8 (RFC 8259), so anything else is refused here, before the SDK.
Only requests of an authenticated user are read: others get the SDK's 401 without their body being buffered.
"""

from __future__ import annotations

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.responses import JSONResponse

from ._limits import ASGIApp, Message, Receive, Scope, Send

PARSE_ERROR = -32700  # JSON-RPC


class Utf8BodyGuard:
    """Innermost Starlette middleware (after authentication) for POST bodies of up to ``max_bytes``."""

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
        if size <= self.max_bytes:  # bigger bodies get the SDK's own 413
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as exc:
                error = {
                    "code": PARSE_ERROR,
                    "message": f"Parse error: the body is not UTF-8 ({exc.reason} at byte {exc.start})",
                }
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
            return {"type": "http.request", "body": body, "more_body": size > self.max_bytes}

        await self.app(scope, replay, send)
