"""Bearer tokens for the MCP server's HTTP transport: one token, one user; only a hash is stored.

``agent-memory token create --user alice`` prints a token once (``amt_`` + 43 random URL-safe characters).
The table ``agent_memory_mcp_tokens`` keeps its SHA-256, its first characters (``token_prefix``, to name it in
``token list`` / ``token revoke``) and the user it acts for; :class:`agent_memory.store.TokenStore` reads and
writes those rows, this module makes, hashes and checks tokens. :class:`StoreTokenVerifier` plugs into the
official SDK's auth (``mcp.server.auth``): the SDK's bearer middleware calls it on every HTTP request and
answers 401 when it returns ``None``; the user travels in ``AccessToken.subject``.

Example:
    >>> import asyncio
    >>> from agent_memory.store import Database
    >>> from agent_memory.auth import TokenManager
    >>> async def main() -> str | None:
    ...     db = await Database.connect()
    ...     try:
    ...         tokens = TokenManager(db)
    ...         created = await tokens.create("alice", name="laptop")
    ...         return await tokens.verify(created.token)
    ...     finally:
    ...         await db.close()
    >>> asyncio.run(main())  # doctest: +SKIP
    'alice'
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any, Literal

from mcp.server.auth.provider import AccessToken
from pydantic import BaseModel

from ..errors import AgentMemoryError
from ..store import Database, TokenStore
from ..validation import check_user_id

TOKEN_MARK = "amt_"
PREFIX_CHARS = 12  # "amt_" + 8 random characters: enough to tell tokens apart, far too few to guess one
MIN_REVOKE_PREFIX_CHARS = 8
SCOPE = "memory"


class TokenNotFound(AgentMemoryError, LookupError):
    """No token matches the given id or prefix."""


class TokenInfo(BaseModel):
    """A token as ``token list`` shows it (never the token itself)."""

    id: str
    user_id: str
    token_prefix: str
    name: str
    created_at: datetime
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None

    @property
    def status(self) -> Literal["active", "revoked", "expired"]:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= datetime.now(self.expires_at.tzinfo):
            return "expired"
        return "active"


class CreatedToken(BaseModel):
    """The result of :meth:`TokenManager.create`: the secret ``token`` (shown once) and its record."""

    token: str
    info: TokenInfo


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _info(row: dict[str, Any]) -> TokenInfo:
    return TokenInfo(**row)


class TokenManager:
    """Create, list, revoke and verify MCP bearer tokens in ``agent_memory_mcp_tokens``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.records = TokenStore(db)

    async def create(self, user_id: str, *, name: str = "", expires_in: timedelta | None = None) -> CreatedToken:
        """A new token for ``user_id`` (the user is created if unknown). The token is not stored, only its hash."""
        user_id = check_user_id(user_id)
        if not isinstance(name, str) or len(name) > 200 or "\x00" in name:
            raise ValueError("token name must be text of at most 200 characters")
        if expires_in is not None and expires_in <= timedelta(0):
            raise ValueError("expiry must be in the future")
        token = TOKEN_MARK + secrets.token_urlsafe(32)
        token_id = "tok_" + secrets.token_hex(6)
        row = await self.records.insert(
            token_id, user_id=user_id, sha256=hash_token(token), prefix=token[:PREFIX_CHARS], name=name,
            expires_in=expires_in,
        )  # fmt: skip
        return CreatedToken(token=token, info=_info(row))

    async def list(self, user_id: str | None = None, *, include_revoked: bool = False) -> list[TokenInfo]:
        """Tokens, newest first; all users unless ``user_id`` is given."""
        if user_id is not None:
            user_id = check_user_id(user_id)
        return [_info(r) for r in await self.records.rows_of(user_id, include_revoked=include_revoked)]

    async def revoke(self, id_or_prefix: str, *, user_id: str | None = None) -> TokenInfo:
        """Revoke the one token whose id, full token, or token prefix (>= 8 characters) is ``id_or_prefix``.

        Raises :class:`TokenNotFound` when nothing matches and ``ValueError`` when several tokens do.
        """
        if not isinstance(id_or_prefix, str) or not id_or_prefix.strip():
            raise ValueError("give a token id (tok_...) or the first characters of the token (amt_...)")
        needle = id_or_prefix.strip()
        if user_id is not None:
            user_id = check_user_id(user_id)
        allow_prefix = len(needle) >= MIN_REVOKE_PREFIX_CHARS
        rows = await self.records.revoke_single_match(
            needle, sha256=hash_token(needle), allow_prefix=allow_prefix, user_id=user_id
        )
        if not rows:
            hint = "" if allow_prefix else f" (a prefix needs at least {MIN_REVOKE_PREFIX_CHARS} characters)"
            raise TokenNotFound(f"no token matches {needle[:PREFIX_CHARS]!r}{hint}; see `agent-memory token list`")
        if len(rows) > 1:
            ids = ", ".join(r["id"] for r in rows)
            raise ValueError(f"{needle[:PREFIX_CHARS]!r} matches several tokens ({ids}); give the token id")
        return _info(rows[0])

    async def lookup(self, token: str) -> tuple[str, str, datetime | None] | None:
        """``(token id, user identifier, expires_at)`` of a valid (known, unrevoked, unexpired) token, else None."""
        if not isinstance(token, str) or not token.startswith(TOKEN_MARK) or len(token) > 200:
            return None
        return await self.records.lookup(hash_token(token))

    async def verify(self, token: str) -> str | None:
        """The user a valid token acts for, else None."""
        found = await self.lookup(token)
        return found[1] if found else None


class StoreTokenVerifier:
    """The SDK's ``TokenVerifier`` protocol over :class:`TokenManager`: user in ``AccessToken.subject``."""

    def __init__(self, tokens: TokenManager) -> None:
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        found = await self.tokens.lookup(token)
        if found is None:
            return None
        token_id, user, expires_at = found
        extra: dict[str, Any] = {"expires_at": int(expires_at.timestamp())} if expires_at else {}
        # client_id is the token id, so the SDK binds each HTTP session to the token that opened it.
        return AccessToken(token=token, client_id=token_id, scopes=[SCOPE], subject=user, **extra)
