"""A memory's life after it is stored: updates with history, facts that change over time, retraction, expiry, audit.

- ``update`` keeps the key and writes a new version; every earlier version stays retrievable byte for byte.
- Preferences and facts carry a *subject* (given, or the description before its first ``:``). A newer one on the
  same subject closes the older one's validity (``valid_until``), so the user layer, lists and default search show
  only what holds now; ``list(as_of=T)`` shows what held then. Two on the same subject valid from the same moment
  contradict with equal strength: both are marked ``contested`` and shown as such, neither wins silently.
- ``retract`` hides a memory from search and the user layer but keeps it retrievable by key, with its status.
- ``expires_at`` (or a TTL per type, ``AGENT_MEMORY_TTL_DAYS``) ends a memory for every read; ``purge`` deletes it.
- Every store, update, retract, delete, import and purge writes one audit row (actor, surface, time, key, reason).

Example:
    >>> derive_subject("user_preference", "Deploy target: blue-green on prod", {})
    'deploy target'
    >>> derive_subject("user_fact", "anything", {"subject": "Home City"})
    'home city'
    >>> derive_subject("command_output", "npm install log", {}) is None
    True
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import MemoryNotFound
from ..models import AuditEntry, MemoryItem, MemoryVersion
from ..placeholders import is_valid_key
from ..search import MEMORY_ITEM_COLUMNS, NOT_EXPIRED
from ..tokens import count_tokens
from ..validation import check_content, check_description, check_metadata, check_user_id
from ._rows import decode_content, encode_content, item_from_row
from ._scoping import find_user_pk, owned_by

if TYPE_CHECKING:
    from ..config import Settings
    from ..search import EmbeddingService
    from ._db import Database

FACT_TYPES = ("user_preference", "user_fact")
SURFACES = ("api", "cli", "mcp", "ui", "agent", "import")
MAX_REASON_CHARS = 2000

_AUDIT_SQL = """
INSERT INTO agent_memory_audit (user_id, memory_key, action, actor, surface, reason, details)
VALUES ($1, $2, $3, $4, $5, $6, $7)
"""
_LOCK_ROW_SQL = f"""
SELECT m.id, m.user_id, m.version, m.memory_type, m.description, m.content, m.content_encoding, m.content_metadata,
       m.token_count, m.char_count, m.content_sha256, coalesce(m.updated_at, m.created_at) AS written_at,
       m.status
FROM agent_memories m WHERE {owned_by("m")} AND m.memory_key = $2 AND {NOT_EXPIRED} FOR UPDATE
"""
_KEEP_VERSION_SQL = """
INSERT INTO agent_memory_versions (memory_id, version, memory_type, description, content, content_encoding,
    content_metadata, token_count, char_count, content_sha256, written_at, actor, surface, user_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
"""
_UPDATE_SQL = f"""
UPDATE agent_memories m SET description = $3, content = $4, content_encoding = $5, content_metadata = $6,
    token_count = $7, char_count = $8, content_sha256 = $9, version = m.version + 1, updated_at = clock_timestamp()
WHERE m.id = $1 AND m.user_id = $2
RETURNING {MEMORY_ITEM_COLUMNS}
"""
_VERSIONS_SQL = f"""
SELECT v.version, v.written_at, v.actor, v.surface, v.description, v.memory_type, v.token_count, v.char_count,
       v.content_sha256, v.content_metadata
FROM agent_memory_versions v JOIN agent_memories m ON m.id = v.memory_id AND m.user_id = v.user_id
WHERE {owned_by("m")} AND m.memory_key = $2 AND {NOT_EXPIRED}
ORDER BY v.version
"""
_CURRENT_WRITER_SQL = """
SELECT actor, surface, at FROM agent_memory_audit
WHERE user_id = $1 AND memory_key = $2 AND action IN ('store', 'update', 'import') ORDER BY id DESC LIMIT 1
"""
_VERSION_CONTENT_SQL = f"""
SELECT v.content, v.content_encoding FROM agent_memory_versions v
JOIN agent_memories m ON m.id = v.memory_id AND m.user_id = v.user_id
WHERE {owned_by("m")} AND m.memory_key = $2 AND v.version = $3 AND {NOT_EXPIRED}
"""
_RETRACT_SQL = f"""
UPDATE agent_memories m SET status = 'retracted', status_reason = $3, is_active = false, updated_at = clock_timestamp()
WHERE {owned_by("m")} AND m.memory_key = $2 AND {NOT_EXPIRED}
RETURNING {MEMORY_ITEM_COLUMNS}, m.user_id AS owner
"""
# $1 user id, $2 subject, $3 the new memory's id, $4 its valid_from.
_CLOSE_EARLIER_SQL = """
UPDATE agent_memories SET valid_until = $4, is_active = false
WHERE user_id = $1 AND subject = $2 AND id <> $3 AND status <> 'retracted'
  AND valid_from < $4 AND (valid_until IS NULL OR valid_until > $4)
RETURNING memory_key
"""
_CONTESTED_SQL = """
UPDATE agent_memories SET status = 'contested'
WHERE user_id = $1 AND subject = $2 AND status <> 'retracted' AND valid_from = $4 AND valid_until IS NULL
  AND EXISTS (SELECT 1 FROM agent_memories o WHERE o.user_id = $1 AND o.subject = $2 AND o.id <> $3
              AND o.status <> 'retracted' AND o.valid_from = $4 AND o.valid_until IS NULL)
RETURNING memory_key
"""
_CLOSE_NEW_SQL = """
UPDATE agent_memories n SET valid_until = later.first, is_active = false
FROM (SELECT min(valid_from) AS first FROM agent_memories
      WHERE user_id = $1 AND subject = $2 AND id <> $3 AND status <> 'retracted' AND valid_from > $4) later
WHERE n.id = $3 AND later.first IS NOT NULL
RETURNING later.first
"""
_EXPIRED_SQL = """
DELETE FROM agent_memories m WHERE m.expires_at <= now() AND ($1::text IS NULL OR m.user_id = $1)
RETURNING m.user_id, m.memory_key
"""
_AUDIT_LOG_SQL = f"""
SELECT a.at, a.action, a.memory_key, a.actor, a.surface, a.reason, a.details
FROM agent_memory_audit a WHERE {owned_by("a")} AND ($2::text IS NULL OR a.memory_key = $2)
ORDER BY a.id DESC LIMIT $3
"""

_SUBJECT_SPLIT = re.compile(r"[:\n]")
_SPACES = re.compile(r"\s+")


def derive_subject(memory_type: str, description: str, metadata: dict[str, Any]) -> str | None:
    """The subject a fact or preference is about: ``metadata["subject"]``, else (for ``user_preference`` and
    ``user_fact``) the description before its first ``:``; lower case, spaces collapsed. Other types: None."""
    given = metadata.get("subject")
    if isinstance(given, str) and given.strip():
        text = given
    elif memory_type in FACT_TYPES and description.strip():
        text = _SUBJECT_SPLIT.split(description, maxsplit=1)[0]
    else:
        return None
    subject = _SPACES.sub(" ", text).strip(" .,;!?-").lower()
    return subject[:255] or None


def check_surface(surface: str) -> str:
    if surface not in SURFACES:
        raise ValueError(f"surface must be one of {', '.join(SURFACES)}, got {surface!r}")
    return surface


def check_reason(reason: object) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("a reason is required (say why, e.g. 'the user moved to Lyon')")
    if len(reason) > MAX_REASON_CHARS or "\x00" in reason:
        raise ValueError(f"reason must be text of at most {MAX_REASON_CHARS} characters without NUL")
    return reason.strip()


def expiry_for(memory_type: str, expires_at: datetime | None, ttl_days: dict[str, float]) -> datetime | None:
    """``expires_at`` if given (timezone-aware), else now + the type's TTL, else None (never)."""
    if expires_at is not None:
        if expires_at.tzinfo is None:
            raise ValueError("expires_at must carry a timezone (e.g. datetime.now(UTC) + timedelta(days=7))")
        return expires_at
    days = ttl_days.get(memory_type)
    return None if days is None else datetime.now(UTC) + timedelta(days=days)


async def record(
    conn: Any, user_pk: str | None, key: str | None, action: str, actor: str | None, surface: str,
    reason: str | None = None, details: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    await conn.execute(_AUDIT_SQL, user_pk, key, action, actor, surface, reason, details or {})


async def settle_subject(conn: Any, user_pk: str, subject: str, memory_id: Any, valid_from: datetime) -> dict[str, Any]:
    """Close the validity of earlier facts on ``subject``, mark equal-time ones contested, and close the new one
    when a later fact exists. Returns what changed (for the audit row). Serialised per (user, subject)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1 || '/' || $2))", user_pk, subject)
    replaced = [r["memory_key"] for r in await conn.fetch(_CLOSE_EARLIER_SQL, user_pk, subject, memory_id, valid_from)]
    contested = [r["memory_key"] for r in await conn.fetch(_CONTESTED_SQL, user_pk, subject, memory_id, valid_from)]
    later = await conn.fetchval(_CLOSE_NEW_SQL, user_pk, subject, memory_id, valid_from)
    changes: dict[str, Any] = {"subject": subject}
    if replaced:
        changes["replaced"] = replaced
    if contested:
        changes["contested"] = contested
    if later is not None:
        changes["valid_until"] = later.isoformat()
    return changes


class MemoryLifecycle:
    """The lifecycle operations of :class:`~agent_memory.store.MemoryStore` (mixed into it)."""

    db: Database
    settings: Settings
    embeddings: EmbeddingService | None

    if TYPE_CHECKING:  # provided by MemoryStore

        async def get(self, key: str, *, user_id: str) -> MemoryItem: ...

        async def retrieve(self, key: str, *, user_id: str) -> str: ...

    async def update(
        self,
        key: str,
        *,
        user_id: str,
        content: str | None = None,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        actor: str | None = None,
        surface: str = "api",
    ) -> MemoryItem:
        """Write a new version of ``key`` (what is not given is kept); the previous version stays retrievable.

        Raises :class:`MemoryNotFound` for a key the user does not have, ``ValueError`` for nothing to change.
        """
        user_id = check_user_id(user_id)
        surface = check_surface(surface)
        if content is None and description is None and metadata is None:
            raise ValueError("nothing to update: give content, a description or metadata")
        if not is_valid_key(key):
            raise MemoryNotFound(str(key))
        raw = None if content is None else check_content(content, self.settings.max_content_bytes)
        new_description = None if description is None else check_description(description)
        new_metadata = None if metadata is None else check_metadata(metadata)
        tokens = None
        if content is not None:
            tokens = await asyncio.to_thread(count_tokens, content, self.settings.token_model)
        async with self.db.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(_LOCK_ROW_SQL, user_id, key)
            if row is None:
                raise MemoryNotFound(key)
            await conn.execute(
                _KEEP_VERSION_SQL, row["id"], row["version"], row["memory_type"], row["description"], row["content"],
                row["content_encoding"], row["content_metadata"], row["token_count"], row["char_count"],
                row["content_sha256"], row["written_at"], *await self._writer_of(conn, row["user_id"], key),
                row["user_id"],
            )  # fmt: skip
            if content is None:
                stored, encoding = row["content"], row["content_encoding"]
                old = decode_content(stored, encoding)
                chars, sha, tokens = len(old), row["content_sha256"], row["token_count"]
            else:
                assert raw is not None
                stored, encoding = encode_content(content)
                chars, sha = len(content), hashlib.sha256(raw).hexdigest()
            updated = await conn.fetchrow(
                _UPDATE_SQL, row["id"], row["user_id"],
                row["description"] if new_description is None else new_description, stored, encoding,
                row["content_metadata"] if new_metadata is None else new_metadata, tokens, chars, sha,
            )  # fmt: skip
            assert updated is not None
            given = {"content": content, "description": description, "metadata": metadata}
            details = {"version": updated["version"], "changed": [name for name, v in given.items() if v is not None]}
            await record(conn, row["user_id"], key, "update", actor, surface, None, details)
        if self.embeddings is not None and (content is not None or description is not None):
            self.embeddings.enqueue(user_pk=str(row["user_id"]), memory_key=key)
        return item_from_row(updated)

    async def _writer_of(self, conn: Any, user_pk: str, key: str) -> tuple[str | None, str]:
        """Who wrote the current version (from the audit), so the kept version says who and through what."""
        found = await conn.fetchrow(_CURRENT_WRITER_SQL, user_pk, key)
        return (found["actor"], found["surface"]) if found else (None, "api")

    async def history(self, key: str, *, user_id: str) -> list[MemoryVersion]:
        """Every version of ``key``, oldest first; the last one is the current version."""
        user_id = check_user_id(user_id)
        item = await self.get(key, user_id=user_id)
        async with self.db.pool.acquire() as conn:
            rows = await conn.fetch(_VERSIONS_SQL, user_id, key)
            owner = await find_user_pk(conn, user_id)
            actor, surface = await self._writer_of(conn, owner or "", key)
        versions = [
            MemoryVersion(
                version=r["version"],
                current=False,
                written_at=r["written_at"],
                actor=r["actor"],
                surface=r["surface"],
                description=r["description"],
                memory_type=r["memory_type"],
                token_count=r["token_count"],
                char_count=r["char_count"],
                content_sha256=r["content_sha256"],
                metadata=r["content_metadata"] or {},
            )
            for r in rows
        ]
        versions.append(
            MemoryVersion(
                version=item.version,
                current=True,
                written_at=item.updated_at or item.created_at,
                actor=actor,
                surface=surface,
                description=item.description,
                memory_type=item.memory_type,
                token_count=item.token_count,
                char_count=item.char_count,
                content_sha256=item.content_sha256,
                metadata=item.metadata,
            )
        )
        return versions

    async def retrieve_version(self, key: str, version: int, *, user_id: str) -> str:
        """The exact content of version ``version`` of ``key`` (the current one included)."""
        user_id = check_user_id(user_id)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError("version must be a positive integer")
        item = await self.get(key, user_id=user_id)
        if version == item.version:
            return await self.retrieve(key, user_id=user_id)
        row = await self.db.pool.fetchrow(_VERSION_CONTENT_SQL, user_id, key, version)
        if row is None:
            raise ValueError(f"{key} has no version {version} (versions 1 to {item.version})")
        return decode_content(row["content"], row["content_encoding"])

    async def retract(
        self, key: str, *, user_id: str, reason: str, actor: str | None = None, surface: str = "api"
    ) -> MemoryItem:
        """Hide ``key`` from search, lists and the user layer (it stays retrievable by key, status ``retracted``)."""
        user_id = check_user_id(user_id)
        surface = check_surface(surface)
        reason = check_reason(reason)
        if not is_valid_key(key):
            raise MemoryNotFound(str(key))
        async with self.db.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(_RETRACT_SQL, user_id, key, reason)
            if row is None:
                raise MemoryNotFound(key)
            await record(conn, row["owner"], key, "retract", actor, surface, reason)
        return item_from_row(row)

    async def purge_expired(self, *, user_id: str | None = None, surface: str = "cli") -> int:
        """Delete memories past their ``expires_at`` (of ``user_id``, or everyone's); each gets an audit row."""
        async with self.db.pool.acquire() as conn, conn.transaction():
            owner = None
            if user_id is not None:
                owner = await find_user_pk(conn, check_user_id(user_id))
                if owner is None:
                    return 0
            rows = await conn.fetch(_EXPIRED_SQL, owner)
            for r in rows:
                await record(conn, r["user_id"], r["memory_key"], "purge", None, surface, "expired")
        return len(rows)

    async def audit_log(self, *, user_id: str, key: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """The user's audit rows, newest first (``key``: only that memory's)."""
        user_id = check_user_id(user_id)
        rows = await self.db.pool.fetch(_AUDIT_LOG_SQL, user_id, key, limit)
        return [
            AuditEntry(
                at=r["at"],
                action=r["action"],
                memory_key=r["memory_key"],
                actor=r["actor"],
                surface=r["surface"],
                reason=r["reason"],
                details=r["details"] or {},
            )
            for r in rows
        ]
