"""UI logins in storage: the ``agent_memory_credentials`` rows and the user list ``agent-memory user list`` shows.

A login is a row next to the user's ``"User"`` row, holding a password hash the auth wing computed; hashing,
password rules and the timing-safe check stay there (:mod:`agent_memory.auth`). The hash is kept out of
``"User".metadata`` on purpose: Chainlit rewrites that column on every login and sends it to the browser.
"""

from __future__ import annotations

from typing import Any

from ._db import Database
from ._scoping import ensure_user_pk, owned_by

_REPLACE_SQL = """
INSERT INTO agent_memory_credentials (user_id, password_hash) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET password_hash = EXCLUDED.password_hash, updated_at = now()
"""
_INSERT_SQL = """
INSERT INTO agent_memory_credentials (user_id, password_hash) VALUES ($1, $2)
ON CONFLICT (user_id) DO NOTHING RETURNING 1
"""
_HASH_SQL = f"SELECT c.password_hash FROM agent_memory_credentials c WHERE {owned_by('c')}"
_REMOVE_SQL = f"DELETE FROM agent_memory_credentials c WHERE {owned_by('c')} RETURNING 1"
_COUNT_SQL = "SELECT count(*) FROM agent_memory_credentials"
# None when the user does not exist (deleted): no session of theirs is valid then.
_SESSION_VERSION_SQL = """
SELECT coalesce(s.version, 0) FROM "User" u LEFT JOIN agent_memory_ui_sessions s ON s.user_id = u.id
WHERE u.identifier = $1
"""
_BUMP_SESSION_SQL = """
INSERT INTO agent_memory_ui_sessions (user_id, version) SELECT u.id, 1 FROM "User" u WHERE u.identifier = $1
ON CONFLICT (user_id) DO UPDATE SET version = agent_memory_ui_sessions.version + 1, updated_at = now()
RETURNING version
"""
_USERS_SQL = """
SELECT u.identifier, u."createdAt" AS created_at,
       EXISTS (SELECT 1 FROM agent_memory_credentials c WHERE c.user_id = u.id) AS has_login,
       (SELECT count(*) FROM agent_memories m WHERE m.user_id = u.id) AS memories,
       (SELECT count(*) FROM "Thread" t WHERE t."userId" = u.id AND t."deletedAt" IS NULL) AS threads
FROM "User" u ORDER BY u.identifier
"""


class LoginStore:
    """Password hashes per user, and the list of every user with their counts."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def set_password_hash(self, identifier: str, password_hash: str, *, replace: bool) -> bool:
        """Store the hash (creating the user if needed). False, and nothing changed, when a login exists and
        ``replace`` is false."""
        async with self.db.pool.acquire() as conn, conn.transaction():
            owner = await ensure_user_pk(conn, identifier)
            if replace:
                await conn.execute(_REPLACE_SQL, owner, password_hash)
                await conn.fetchval(_BUMP_SESSION_SQL, identifier)  # a new password ends the old sessions
                return True
            return await conn.fetchval(_INSERT_SQL, owner, password_hash) is not None

    async def password_hash(self, identifier: str) -> str | None:
        """The stored hash of ``identifier``, or None when the user has no login (or does not exist)."""
        found = await self.db.pool.fetchval(_HASH_SQL, identifier)
        return None if found is None else str(found)

    async def remove(self, identifier: str) -> bool:
        """Delete the login of ``identifier`` and end their sessions; False when there was no login."""
        async with self.db.pool.acquire() as conn, conn.transaction():
            await conn.fetchval(_BUMP_SESSION_SQL, identifier)
            return await conn.fetchval(_REMOVE_SQL, identifier) is not None

    async def session_version(self, identifier: str) -> int | None:
        """The UI session version of ``identifier``; None when the user does not exist."""
        found = await self.db.pool.fetchval(_SESSION_VERSION_SQL, identifier)
        return None if found is None else int(found)

    async def end_sessions(self, identifier: str) -> int | None:
        """Bump the session version: every session token issued before is refused. None: no such user."""
        found = await self.db.pool.fetchval(_BUMP_SESSION_SQL, identifier)
        return None if found is None else int(found)

    async def count(self) -> int:
        return int(await self.db.pool.fetchval(_COUNT_SQL) or 0)

    async def users(self) -> list[dict[str, Any]]:
        """Every user: identifier, created_at, has_login, memories, threads (by identifier)."""
        return [dict(r) for r in await self.db.pool.fetch(_USERS_SQL)]
