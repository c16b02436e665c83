"""MCP bearer tokens in storage: the ``agent_memory_mcp_tokens`` rows (a token's SHA-256, never the token).

Token format, hashing, validation and what counts as a match live in the auth wing (:mod:`agent_memory.auth`);
this module only reads and writes rows. Rows come back as dicts with the owner's identifier as ``user_id``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ._db import Database
from ._scoping import ensure_user_pk, owned_by

TOUCH_SECONDS = 60  # last_used_at is refreshed at most once a minute per token, not on every request

_COLUMNS = (
    "t.id, u.identifier AS user_id, t.token_prefix, t.name, t.created_at, t.expires_at, t.last_used_at, t.revoked_at"
)
_INSERT_SQL = f"""
WITH ins AS (
    INSERT INTO agent_memory_mcp_tokens (id, user_id, token_sha256, token_prefix, name, expires_at)
    VALUES ($1, $2, $3, $4, $5, now() + $6::interval) RETURNING *)
SELECT {_COLUMNS} FROM ins t JOIN "User" u ON u.id = t.user_id
"""
_LIST_SQL = f"""
SELECT {_COLUMNS} FROM agent_memory_mcp_tokens t JOIN "User" u ON u.id = t.user_id
WHERE ($1::text IS NULL OR {owned_by("t")}) AND ($2 OR t.revoked_at IS NULL)
ORDER BY t.created_at DESC, t.id
"""
# $1 id, prefix or whole token, $2 its SHA-256, $3 whether $1 may match as a prefix, $4 owner (NULL: anyone's)
_MATCH_FOR_UPDATE_SQL = f"""
SELECT {_COLUMNS} FROM agent_memory_mcp_tokens t JOIN "User" u ON u.id = t.user_id
WHERE ($4::text IS NULL OR {owned_by("t", "$4")})
  AND (t.id = $1 OR t.token_sha256 = $2
       OR ($3 AND (starts_with(t.token_prefix, $1) OR starts_with($1, t.token_prefix))))
FOR UPDATE OF t
"""
_REVOKE_SQL = f"""
WITH upd AS (
    UPDATE agent_memory_mcp_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING *)
SELECT {_COLUMNS} FROM upd t JOIN "User" u ON u.id = t.user_id
"""
_LOOKUP_SQL = f"""
WITH hit AS (
    SELECT t.id, u.identifier, t.expires_at, t.last_used_at
    FROM agent_memory_mcp_tokens t JOIN "User" u ON u.id = t.user_id
    WHERE t.token_sha256 = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
), touch AS (
    UPDATE agent_memory_mcp_tokens SET last_used_at = now()
    WHERE id IN (SELECT id FROM hit WHERE last_used_at IS NULL
                 OR last_used_at < now() - interval '{TOUCH_SECONDS} seconds')
)
SELECT id, identifier, expires_at FROM hit
"""


class TokenStore:
    """Insert, list, revoke and look up MCP token rows."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def insert(
        self, token_id: str, *, user_id: str, sha256: str, prefix: str, name: str, expires_in: timedelta | None
    ) -> dict[str, Any]:
        """Store a new token row for ``user_id`` (the user is created if unknown) and return it."""
        async with self.db.pool.acquire() as conn, conn.transaction():
            owner = await ensure_user_pk(conn, user_id)
            row = await conn.fetchrow(_INSERT_SQL, token_id, owner, sha256, prefix, name, expires_in)
        assert row is not None
        return dict(row)

    async def rows_of(self, user_id: str | None, *, include_revoked: bool) -> list[dict[str, Any]]:
        """Token rows, newest first; all users' when ``user_id`` is None."""
        return [dict(r) for r in await self.db.pool.fetch(_LIST_SQL, user_id, include_revoked)]

    async def revoke_single_match(
        self, needle: str, *, sha256: str, allow_prefix: bool, user_id: str | None
    ) -> list[dict[str, Any]]:
        """The tokens ``needle`` matches (by id, SHA-256, or prefix when allowed), locked while deciding.

        Exactly one match is revoked and returned as it is now; none or several are returned unchanged,
        for the caller to say why nothing was revoked.
        """
        async with self.db.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(_MATCH_FOR_UPDATE_SQL, needle, sha256, allow_prefix, user_id)
            if len(rows) != 1:
                return [dict(r) for r in rows]
            revoked = await conn.fetchrow(_REVOKE_SQL, rows[0]["id"])
        assert revoked is not None
        return [dict(revoked)]

    async def lookup(self, sha256: str) -> tuple[str, str, datetime | None] | None:
        """``(token id, user identifier, expires_at)`` of a known, unrevoked, unexpired token (and marks it used)."""
        row = await self.db.pool.fetchrow(_LOOKUP_SQL, sha256)
        if row is None:
            return None
        return str(row["id"]), str(row["identifier"]), row["expires_at"]
