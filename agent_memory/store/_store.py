"""MemoryStore: the user-scoped detail layer (table ``agent_memories``).

Every method takes the user's identifier (the Chainlit ``"User".identifier``) and every read filters
by it in SQL. A key that belongs to another user raises exactly the same :class:`MemoryNotFound` as a
key that does not exist.

Example:
    >>> import asyncio
    >>> from agent_memory import MemoryStore
    >>> async def main() -> str:
    ...     async with await MemoryStore.open() as store:   # embedded PostgreSQL unless a URL is set
    ...         key = await store.store("line 1\\nERROR disk full\\n", user_id="alice",
    ...                                 description="df output", memory_type="command_output")
    ...         return await store.retrieve(key, user_id="alice", grep="ERROR")
    >>> asyncio.run(main())  # doctest: +SKIP
    '2:ERROR disk full'
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Unpack

import asyncpg

from ..config import Settings, get_settings
from ..errors import MemoryNotFound
from ..models import MemoryItem, MemoryStats
from ..placeholders import is_valid_key
from ..search import (
    MEMORY_ITEM_COLUMNS,
    NOT_EXPIRED,
    Embedder,
    EmbeddingError,
    EmbeddingService,
    ReindexReport,
    SearchOptions,
    embedder_from_settings,
    hybrid_search,
)
from ..tokens import count_tokens
from ..validation import (
    check_content,
    check_description,
    check_identifier,
    check_limit,
    check_memory_type,
    check_metadata,
    check_query,
    check_user_id,
)
from ._db import Database
from ._export import export_lines, import_records, parse_export
from ._lifecycle import MemoryLifecycle, check_surface, derive_subject, expiry_for, record, settle_subject
from ._rows import decode_content, encode_content, item_from_row, new_key
from ._scoping import ENSURE_USER_CTES, ENSURED_USER_PK, find_user_pk, owned_by
from ._slots import PerUserSlots
from ._transforms import ContentView, apply_transforms, check_view, grep_off_loop

_TOKEN_COUNT_IN_THREAD_CHARS = 200_000  # count big contents off the event loop
SEARCH_SLOTS_PER_USER = 2  # concurrent searches of one user in one process (a pool has 10 connections)

# Every statement below takes the user's identifier as $1 and reaches the user's rows through the scoping module
# (owned_by; the insert creates the user on first use in the same round trip and returns the user's id for the
# vector writer).
_INSERT_SQL = f"""
WITH {ENSURE_USER_CTES},
inserted AS (
    INSERT INTO agent_memories (user_id, memory_key, memory_type, description, content, content_encoding,
        content_metadata, token_count, char_count, content_sha256, agent_id, thread_id, subject, valid_from,
        expires_at)
    SELECT {ENSURED_USER_PK}, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, coalesce($14, now()), $15
    RETURNING id, memory_key, user_id, valid_from
),
audited AS (
    INSERT INTO agent_memory_audit (user_id, memory_key, action, actor, surface)
    SELECT user_id, memory_key, 'store', $16, $17 FROM inserted
)
SELECT id, memory_key, user_id, valid_from FROM inserted
"""
# What storing a fact changed on its subject goes into the store's own audit row (one row per change).
_AUDIT_DETAILS_SQL = """
UPDATE agent_memory_audit SET details = $3
WHERE id = (SELECT max(id) FROM agent_memory_audit WHERE user_id = $1 AND memory_key = $2 AND action = 'store')
"""
_RETRIEVE_SQL = f"""
UPDATE agent_memories m SET access_count = m.access_count + 1, last_accessed_at = now()
WHERE {owned_by("m")} AND m.memory_key = $2 AND {NOT_EXPIRED}
RETURNING m.content, m.content_encoding
"""
_GET_SQL = f"""
SELECT {MEMORY_ITEM_COLUMNS} FROM agent_memories m WHERE {owned_by("m")} AND m.memory_key = $2 AND {NOT_EXPIRED}
"""
_LIST_SQL = f"""
SELECT {MEMORY_ITEM_COLUMNS} FROM agent_memories m
WHERE {owned_by("m")} AND {NOT_EXPIRED}
  AND CASE WHEN $8::timestamptz IS NULL THEN m.is_active  -- now: what is current
      ELSE m.status <> 'retracted' AND m.created_at <= $8 AND m.valid_from <= $8
           AND (m.valid_until IS NULL OR m.valid_until > $8) END  -- as of $8: what held then
  AND ($2::text IS NULL OR m.memory_type = $2)
  AND ($3::text IS NULL OR m.thread_id = $3)
  AND ($4::text IS NULL OR m.agent_id = $4)
  AND ($5::timestamptz IS NULL OR m.created_at >= $5)
ORDER BY m.created_at DESC, m.memory_key
LIMIT $6 OFFSET $7
"""
_STATS_SQL = f"""
SELECT m.memory_type, count(*) AS n, coalesce(sum(m.token_count), 0) AS tokens
FROM agent_memories m WHERE {owned_by("m")} AND m.is_active AND {NOT_EXPIRED}
GROUP BY m.memory_type ORDER BY m.memory_type
"""
_DELETE_SQL = f"""
WITH gone AS (
    DELETE FROM agent_memories m WHERE {owned_by("m")} AND m.memory_key = $2 RETURNING m.user_id, m.memory_key
),
audited AS (
    INSERT INTO agent_memory_audit (user_id, memory_key, action, actor, surface, reason)
    SELECT user_id, memory_key, 'delete', $3, $4, $5 FROM gone
)
SELECT 1 FROM gone
"""
# What forget-user removes, counted before the user row goes (everything below cascades from it).
_FORGET_RECEIPT_SQL = """
SELECT (SELECT count(*) FROM agent_memories WHERE user_id = $1) AS memories,
       (SELECT count(*) FROM agent_memory_versions WHERE user_id = $1) AS memory_versions,
       (SELECT count(*) FROM "Thread" WHERE "userId" = $1) AS threads,
       (SELECT count(*) FROM agent_memory_contexts WHERE user_id = $1) AS saved_contexts,
       (SELECT count(*) FROM skills WHERE user_id = $1) AS skills,
       (SELECT count(*) FROM agent_memory_mcp_tokens WHERE user_id = $1) AS mcp_tokens,
       (SELECT count(*) FROM agent_memory_credentials WHERE user_id = $1) AS logins,
       (SELECT count(*) FROM agent_memory_ui_sessions WHERE user_id = $1) AS ui_sessions,
       (SELECT count(*) FROM agent_memory_audit WHERE user_id = $1) AS audit_rows
"""
_COUNT_ALL_SQL = f"SELECT count(*) FROM agent_memories m WHERE {owned_by('m')}"
_DELETE_USER_SQL = 'DELETE FROM "User" WHERE identifier = $1'  # cascades to everything the user owns
# $2 limit, $3 characters of content: the user's standing preferences and facts, newest first.
_STANDING_SQL = f"""
SELECT {MEMORY_ITEM_COLUMNS}, left(m.content, $3) AS head, m.content_encoding
FROM agent_memories m
WHERE {owned_by("m")} AND m.is_active AND {NOT_EXPIRED} AND m.memory_type IN ('user_preference', 'user_fact')
ORDER BY m.created_at DESC, m.memory_key LIMIT $2
"""
# $2 keys, $3 needles (lower case), $4 characters scanned: which needles each of the user's keys contains.
_KEYS_CONTAINING_SQL = f"""
SELECT m.memory_key,
       ARRAY(SELECT i FROM unnest($3::text[]) AS i WHERE strpos(lower(left(m.content, $4)), i) > 0) AS hits
FROM agent_memories m
WHERE {owned_by("m")} AND m.memory_key = ANY($2::text[]) AND m.is_active AND {NOT_EXPIRED}
"""


class MemoryStore(MemoryLifecycle):
    """Store and recall exact content per user.

    Open with :meth:`open` (embedded PostgreSQL unless ``dsn`` or ``AGENT_MEMORY_DATABASE_URL`` is given)
    and close with :meth:`close`, or use ``async with``.
    """

    def __init__(self, db: Database, settings: Settings | None = None, *, owns_db: bool = True) -> None:
        self.db = db
        self.settings = settings or get_settings()
        self._owns_db = owns_db
        # Dense retrieval (agent_memory.search); None: lexical search only (the default).
        self.embeddings: EmbeddingService | None = None
        # A user's parallel searches beyond these wait for that user's earlier ones: a flood of costly queries
        # holds at most this many pooled connections, never all of them.
        self.search_slots = PerUserSlots(SEARCH_SLOTS_PER_USER)

    @classmethod
    async def open(
        cls, dsn: str | None = None, *, settings: Settings | None = None, embedder: Embedder | None = None
    ) -> MemoryStore:
        """Connect (starting the embedded server if needed) and apply the schema.

        ``embedder`` enables dense retrieval (None: ``AGENT_MEMORY_EMBEDDER``, default none = lexical only).
        """
        settings = settings or get_settings()
        db = await Database.connect(dsn, settings=settings)
        store = cls(db, settings)
        store.embeddings = await EmbeddingService.start(db.pool, embedder or embedder_from_settings(settings))
        return store

    async def close(self) -> None:
        if self.embeddings is not None:
            await self.embeddings.close()
            self.embeddings = None
        if self._owns_db:
            await self.db.close()

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ write

    async def store(
        self,
        content: str,
        *,
        user_id: str,
        description: str = "",
        memory_type: str = "note",
        agent_id: str | None = None,
        thread_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        token_count: int | None = None,
        valid_from: datetime | None = None,
        expires_at: datetime | None = None,
        actor: str | None = None,
        surface: str = "api",
    ) -> str:
        """Store ``content`` exactly for ``user_id`` and return its new key.

        ``token_count`` may be passed when the caller already counted (MemoryContext does); otherwise it
        is counted with tiktoken. Raises ``ValueError`` for content that cannot be stored exactly.
        A preference or fact (or any memory with ``metadata["subject"]``) replaces the earlier one on its subject
        from ``valid_from`` (default now) on; ``expires_at`` (default: the type's ``AGENT_MEMORY_TTL_DAYS``) ends
        it for every read. ``actor`` and ``surface`` go into the audit row.
        """
        user_id = check_user_id(user_id)
        raw = check_content(content, self.settings.max_content_bytes)
        description = check_description(description)
        memory_type = check_memory_type(memory_type)
        agent_id = check_identifier(agent_id, "agent_id", optional=True)
        thread_id = check_identifier(thread_id, "thread_id", optional=True)
        meta = check_metadata(metadata)
        surface = check_surface(surface)
        actor = check_identifier(actor, "actor", optional=True)
        if valid_from is not None and valid_from.tzinfo is None:
            raise ValueError("valid_from must carry a timezone")
        expires = expiry_for(memory_type, expires_at, self.settings.ttl_days)
        subject = derive_subject(memory_type, description, meta)
        if token_count is None:
            if len(content) > _TOKEN_COUNT_IN_THREAD_CHARS:
                token_count = await asyncio.to_thread(count_tokens, content, self.settings.token_model)
            else:
                token_count = count_tokens(content, self.settings.token_model)
        stored, encoding = encode_content(content)
        sha = hashlib.sha256(raw).hexdigest()
        args = (memory_type, description, stored, encoding, meta, token_count, len(content), sha, agent_id, thread_id,
                subject, valid_from, expires, actor, surface)  # fmt: skip
        for _attempt in range(5):
            key = new_key(memory_type)
            try:
                if subject is None:
                    inserted = await self.db.pool.fetchrow(_INSERT_SQL, user_id, key, *args)
                else:  # one transaction: the new fact and the end of the one it replaces
                    async with self.db.pool.acquire() as conn, conn.transaction():
                        inserted = await conn.fetchrow(_INSERT_SQL, user_id, key, *args)
                        assert inserted is not None
                        changes = await settle_subject(
                            conn, inserted["user_id"], subject, inserted["id"], inserted["valid_from"]
                        )
                        if len(changes) > 1:
                            await conn.execute(_AUDIT_DETAILS_SQL, inserted["user_id"], key, changes)
            except asyncpg.UniqueViolationError:
                continue  # key collision (48 random bits): draw another
            except asyncpg.NotNullViolationError:
                continue  # another session created the user concurrently: it exists now
            assert inserted is not None
            if self.embeddings is not None:  # vector written in the background
                self.embeddings.enqueue(user_pk=str(inserted["user_id"]), memory_key=str(inserted["memory_key"]))
            return str(inserted["memory_key"])
        raise RuntimeError("could not allocate a unique memory key after 5 attempts")

    # ------------------------------------------------------------------ read

    async def retrieve(self, key: str, *, user_id: str, **view: Unpack[ContentView]) -> str:
        """The exact content of ``key``, or a view of it (``head``, ``tail``, ``lines``, ``grep`` with ``context``,
        ``ignore_case``, ``max_matches``: see :func:`agent_memory.store.apply_transforms`).

        Raises :class:`MemoryNotFound` when the key does not exist for this user, including when it
        belongs to someone else. Records the access (``access_count``, ``last_accessed_at``).
        """
        user_id = check_user_id(user_id)
        if not is_valid_key(key):
            raise MemoryNotFound(str(key))
        check_view(view)  # fail on a bad option or pattern before touching the database
        row = await self.db.pool.fetchrow(_RETRIEVE_SQL, user_id, key)
        if row is None:
            raise MemoryNotFound(key)
        content = decode_content(row["content"], row["content_encoding"])
        if view.get("grep") is not None:
            # in a thread: a costly pattern runs up to its time limit without stalling other requests
            return await grep_off_loop(user_id, lambda: apply_transforms(content, **view))
        return apply_transforms(content, **view)

    async def get(self, key: str, *, user_id: str) -> MemoryItem:
        """What is known about ``key`` (description, type, tokens, metadata) without its content."""
        user_id = check_user_id(user_id)
        if not is_valid_key(key):
            raise MemoryNotFound(str(key))
        row = await self.db.pool.fetchrow(_GET_SQL, user_id, key)
        if row is None:
            raise MemoryNotFound(key)
        return item_from_row(row)

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 5,
        memory_type: str | None = None,
        min_score: float | None = None,
        mmr: float | None = None,
    ) -> list[MemoryItem]:
        """The user's memories that best match ``query``, best first, each with a ``score`` in [0, 1].

        Hits below ``min_score`` (default ``settings.search_min_score``) are dropped, so an unrelated query
        returns few hits or none (lexical: none unless a word matches); ``mmr`` (0..1) re-ranks for diversity.
        See :mod:`agent_memory.search`.
        """
        user_id = check_user_id(user_id)
        limit = check_limit(limit, maximum=100)
        if memory_type is not None:
            memory_type = check_memory_type(memory_type)
        query = check_query(query)
        if not query:
            return []
        options = SearchOptions(
            min_score=self.settings.search_min_score if min_score is None else float(min_score), mmr=mmr
        )
        # The user is resolved on the connection the lexical ranking then uses: no extra pool checkout.
        async with self.search_slots.hold(user_id), self.db.pool.acquire() as conn:
            owner = await find_user_pk(conn, user_id)
            if owner is None:
                return []  # no such user: nothing to rank
            rows = await hybrid_search(
                self.db.pool, query, user_pk=owner, limit=limit, memory_type=memory_type, embeddings=self.embeddings,
                options=options, connection=conn,
            )  # fmt: skip
        return [item_from_row(r) for r in rows]

    async def list(
        self,
        *,
        user_id: str,
        memory_type: str | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        since: datetime | None = None,
        limit: int = 50,
        offset: int = 0,
        as_of: datetime | None = None,
    ) -> list[MemoryItem]:
        """The user's current memories, newest first, optionally filtered; ``as_of``: those that held at that time
        (a fact replaced since then included, one stored later or retracted not)."""
        user_id = check_user_id(user_id)
        limit = check_limit(limit, maximum=10_000)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError("offset must be a non-negative integer")
        if memory_type is not None:
            memory_type = check_memory_type(memory_type)
        thread_id = check_identifier(thread_id, "thread_id", optional=True)
        agent_id = check_identifier(agent_id, "agent_id", optional=True)
        if as_of is not None and as_of.tzinfo is None:
            raise ValueError("as_of must carry a timezone")
        rows = await self.db.pool.fetch(
            _LIST_SQL, user_id, memory_type, thread_id, agent_id, since, limit, offset, as_of
        )
        return [item_from_row(r) for r in rows]

    async def stats(self, *, user_id: str) -> MemoryStats:
        """Counts and token totals of the user's memories, by type."""
        user_id = check_user_id(user_id)
        rows = await self.db.pool.fetch(_STATS_SQL, user_id)
        by_type = {r["memory_type"]: {"count": int(r["n"]), "tokens": int(r["tokens"])} for r in rows}
        return MemoryStats(
            total_memories=sum(v["count"] for v in by_type.values()),
            total_tokens=sum(v["tokens"] for v in by_type.values()),
            by_type=by_type,
        )

    # ------------------------------------------------------------------ users and vectors

    async def user_exists(self, user_id: str) -> bool:
        """Whether the database knows ``user_id`` (stored anything, logged in, or holds a token)."""
        return await find_user_pk(self.db.pool, check_user_id(user_id)) is not None

    async def _vector_scope(self, user_id: str | None) -> tuple[str, ...] | None:
        """The row ids the vector writer works on: None = everyone; an unknown user = nobody."""
        if user_id is None:
            return None
        found = await find_user_pk(self.db.pool, user_id)
        return () if found is None else (found,)

    def _embedding_service(self) -> EmbeddingService:
        if self.embeddings is None:
            raise EmbeddingError("no embedder is configured (AGENT_MEMORY_EMBEDDER): there are no vectors to build")
        return self.embeddings

    async def count_unembedded(self, *, user_id: str | None = None) -> int:
        """Memories of ``user_id`` (None: everyone) without a vector of the configured embedder."""
        service = self._embedding_service()
        return await service.count_missing(user_pks=await self._vector_scope(user_id))

    async def reindex(
        self,
        *,
        user_id: str | None = None,
        batch_size: int | None = None,
        prune: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> ReindexReport:
        """Embed the memories of ``user_id`` (None: everyone) that lack a vector; see ``EmbeddingService.reindex``."""
        service = self._embedding_service()
        scope = await self._vector_scope(user_id)
        return await service.reindex(user_pks=scope, batch_size=batch_size, prune=prune, progress=progress)

    # ------------------------------------------------------------------ delete

    async def delete(
        self, key: str, *, user_id: str, actor: str | None = None, surface: str = "api", reason: str | None = None
    ) -> None:
        """Delete ``key`` (and its versions). Raises :class:`MemoryNotFound` when the user has no such memory."""
        user_id = check_user_id(user_id)
        surface = check_surface(surface)
        if not is_valid_key(key):
            raise MemoryNotFound(str(key))
        deleted = await self.db.pool.fetchval(_DELETE_SQL, user_id, key, actor, surface, reason)
        if deleted is None:
            raise MemoryNotFound(key)

    async def forget_user(self, user_id: str) -> int:
        """Delete the user and everything they own (memories, threads, steps...). Returns memories deleted."""
        return (await self.forget_user_receipt(user_id)).get("memories", 0)

    async def forget_user_receipt(self, user_id: str, *, surface: str = "api") -> dict[str, int]:
        """Delete the user and every row they own; return how many of each kind were removed (all zero and nothing
        done for an unknown user). The forget itself is audited without the user: only a hash of the name."""
        user_id = check_user_id(user_id)
        async with self.db.pool.acquire() as conn, conn.transaction():
            owner = await find_user_pk(conn, user_id)
            if owner is None:
                return {}
            counts = dict(await conn.fetchrow(_FORGET_RECEIPT_SQL, owner) or {})
            await conn.execute(_DELETE_USER_SQL, user_id)
            details = {"user_sha256": hashlib.sha256(user_id.encode()).hexdigest(), **counts}
            await record(conn, None, None, "forget", None, surface, None, details)
        return {name: int(n) for name, n in counts.items()}

    # ------------------------------------------------------------------ export / import

    def export(self, *, user_id: str) -> AsyncIterator[str]:
        """The user's memories as JSON Lines (a header line first), content byte for byte, with versions."""
        return export_lines(self, check_user_id(user_id))

    async def import_lines(
        self, lines: Iterable[str], *, user_id: str, actor: str | None = None, surface: str = "api"
    ) -> builtins.list[str]:
        """Import an export (from any user or database) as memories of ``user_id``, all or none; the keys."""
        user_id = check_user_id(user_id)
        surface = check_surface(surface)
        return await import_records(self, parse_export(lines), user_id=user_id, actor=actor, surface=surface)

    # ------------------------------------------------------------------ recall (MemoryContext)

    async def standing_memories(
        self, *, user_id: str, limit: int = 50, content_chars: int = 2000
    ) -> Sequence[tuple[MemoryItem, str]]:
        """The user's preferences and facts (``user_preference``, ``user_fact``), newest first, each with the
        first ``content_chars`` characters of its content (the user layer of a MemoryContext)."""
        user_id = check_user_id(user_id)
        rows = await self.db.pool.fetch(_STANDING_SQL, user_id, limit, content_chars)
        return [(item_from_row(r), decode_content(r["head"], r["content_encoding"])) for r in rows]

    async def keys_containing(
        self, needles: Sequence[str], *, user_id: str, keys: Sequence[str], scan_chars: int = 1_000_000
    ) -> dict[str, set[str]]:
        """For each of the user's ``keys``, which ``needles`` (lower case) its content contains (case-insensitive,
        within the first ``scan_chars`` characters). Keys without a hit, or not the user's, are left out."""
        user_id = check_user_id(user_id)
        if not needles or not keys:
            return {}
        rows = await self.db.pool.fetch(_KEYS_CONTAINING_SQL, user_id, list(keys), list(needles), scan_chars)
        return {r["memory_key"]: set(r["hits"]) for r in rows if r["hits"]}
