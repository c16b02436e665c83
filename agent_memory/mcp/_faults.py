"""Database outages on the shared MCP HTTP server: 503 with one clear message, no traceback per request.

Every request checks its bearer token in the database, so during an outage each one failed inside the SDK's
authentication middleware: a bare 500 and a traceback in the log per request (847 in 7 s under a client's
retries). Here such a request is answered ``503`` with what happened and a ``Retry-After``; the store's pool logs
the outage once when it starts and once when it ends.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from ..errors import DatabaseUnavailable
from ._limits import ASGIApp, Receive, Scope, Send

RETRY_AFTER_SECONDS = 5


def database_unavailable_response(error: DatabaseUnavailable) -> JSONResponse:
    return JSONResponse(
        {"error": "database_unavailable", "error_description": str(error)},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def answer_server_error(request: Request, exc: Exception) -> Response:
    """Starlette's last-resort handler: 503 for a database fault, the usual bare 500 for anything else."""
    if isinstance(exc, DatabaseUnavailable):
        return database_unavailable_response(exc)
    return PlainTextResponse("Internal Server Error", status_code=500)


class DatabaseFaultGuard:
    """Outermost ASGI middleware: a :class:`DatabaseUnavailable` raised by the app or by the middleware in front
    of it (the session cap checks tokens too) is answered 503 if nothing was sent yet, and never re-raised to the
    server, which would log a traceback for every request of the outage."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking_send(message: Any) -> None:
            nonlocal started
            started = started or message.get("type") == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except DatabaseUnavailable as exc:
            if scope["type"] != "http" or started:
                return
            response = database_unavailable_response(exc)
            await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
            await send({"type": "http.response.body", "body": bytes(response.body)})
