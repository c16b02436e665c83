"""Writing dense vectors off the hot path, and backfilling them (``agent-memory reindex``).

:class:`EmbeddingService` sits between a :class:`~agent_memory.store.MemoryStore` and its
:class:`~agent_memory.search.Embedder`:

* ``store()`` only *enqueues* the new key (no model call, no extra query): a background task collects keys
  into batches (up to ``batch_size`` or ``max_wait`` seconds), embeds them in one call and upserts the
  vectors. A failure is logged and the memory stays lexical-only until ``reindex`` fills it in.
* :meth:`EmbeddingService.reindex` embeds every memory that has no vector in the current space (model and
  dimension), batch by batch, reporting progress; ``--prune`` drops vectors of other spaces.
* :meth:`EmbeddingService.query_vector` embeds a search query (with a timeout; on failure search falls back
  to lexical ranking).

Without pgvector on the server the service reports ``available = False`` and does nothing.

Example:
    >>> import asyncio
    >>> from agent_memory import MemoryStore
    >>> from agent_memory.search._embedders import SentenceTransformerEmbedder
    >>> async def main() -> None:
    ...     store = await MemoryStore.open(embedder=SentenceTransformerEmbedder())
    ...     await store.store("ERROR: disk full on /dev/sda1", user_id="alice", description="df -h")
    ...     assert store.embeddings is not None
    ...     await store.embeddings.flush()           # wait for the background writer (tests, scripts)
    ...     await store.close()
    >>> asyncio.run(main())  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg
from pydantic import BaseModel

from ._embedders import Embedder, EmbeddingError
from ._embedding_text import (
    EMBEDDING_RECIPE,
    HEAD_CHARS,
    SALIENT_LINES_SQL,
    SALIENT_TIMEOUT_MS,
    TAIL_CHARS,
    embedding_text,
)

log = logging.getLogger(__name__)


def vector_literal(vec: Sequence[float]) -> str:
    """pgvector's text form, e.g. ``[0.1,0.2]`` (no asyncpg codec needed)."""
    return "[" + ",".join(f"{x:.7g}" for x in vec) + "]"


def sql_literal(text: str) -> str:
    """A SQL string literal (for the partial-index predicate, which must be a constant)."""
    return "'" + text.replace("'", "''") + "'"


class ReindexReport(BaseModel):
    """What ``reindex`` did."""

    model: str
    embedded: int
    failed: int
    pruned: int
    missing_before: int


# A memory lacks a vector in space $1 when it has none, one of older content, or (a long output) one made by an
# older recipe of embedding_text.
_LACKS_VECTOR = f"""NOT EXISTS (
    SELECT 1 FROM agent_memory_embeddings e
    WHERE e.memory_id = m.id AND e.user_id = m.user_id AND e.model = $1 AND e.content_sha256 = m.content_sha256
      AND (e.recipe >= {EMBEDDING_RECIPE} OR m.char_count <= {HEAD_CHARS + TAIL_CHARS}))"""

_FETCH_TEXT_SQL = f"""
SELECT m.id, m.user_id, m.content_sha256, m.description, m.char_count,
       left(m.content, {HEAD_CHARS}) AS head,
       CASE WHEN m.char_count > {HEAD_CHARS + TAIL_CHARS} THEN right(m.content, {TAIL_CHARS}) ELSE '' END AS tail
FROM agent_memories m
"""


class EmbeddingService:
    """Background vector writer + reindexer + query embedder for one store and one embedder."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        embedder: Embedder,
        *,
        batch_size: int = 64,
        max_wait: float = 0.05,
        queue_size: int = 10_000,
        query_timeout: float = 10.0,
    ) -> None:
        self.pool = pool
        self.embedder = embedder
        self.batch_size = batch_size
        self.max_wait = max_wait
        self.query_timeout = query_timeout
        self.available = False  # pgvector present and the embeddings table exists
        self.ready = False  # dimension known, index ensured
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue(maxsize=queue_size)
        self._task: asyncio.Task[None] | None = None
        self._ready_lock = asyncio.Lock()
        self.dropped = 0
        self.failed = 0

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def start(cls, pool: asyncpg.Pool, embedder: Embedder, **kwargs: Any) -> EmbeddingService | None:
        """A running service, or ``None`` when the embedder is :class:`NoEmbedder` (lexical only)."""
        if not embedder.enabled:
            return None
        service = cls(pool, embedder, **kwargs)
        service.available = await pool.fetchval(
            "SELECT to_regclass('agent_memory_embeddings') IS NOT NULL "
            "AND EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')"
        )
        if not service.available:
            log.warning(
                "an embedder (%s) is configured but the database has no pgvector: search stays lexical",
                embedder.model_name,
            )
            return service
        service._task = asyncio.create_task(service._run(), name="agent-memory-embedding-writer")
        return service

    async def ensure_ready(self) -> bool:
        """Learn the dimension (one tiny model call if unknown) and create the space's HNSW index."""
        if self.ready or not self.available:
            return self.ready
        async with self._ready_lock:
            if self.ready:
                return True
            dim = await self.embedder.probe_dimension()
            await ensure_vector_index(self.pool, self.embedder.model_id, dim)
            self.ready = True
        return True

    async def flush(self) -> None:
        """Wait until every enqueued memory has been embedded (or has failed)."""
        if self._task is not None:
            await self._queue.join()

    async def close(self, flush_timeout: float = 30.0) -> None:
        """Flush (bounded by ``flush_timeout`` seconds), stop the writer and close the embedder."""
        if self._task is not None:
            try:
                await asyncio.wait_for(self.flush(), flush_timeout)
            except TimeoutError:
                log.warning("embedding writer stopped with %d memories unembedded (reindex fills them)",
                            self._queue.qsize())  # fmt: skip
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await self.embedder.close()

    # ------------------------------------------------------------------ hot path

    def enqueue(self, *, user_pk: str, memory_key: str) -> None:
        """Queue a just-stored memory (its owner's row id, not the login name, and its key) for
        embedding. Never blocks, never raises."""
        if self._task is None:
            return
        try:
            self._queue.put_nowait((user_pk, memory_key))
        except asyncio.QueueFull:
            self.dropped += 1  # reindex backfills it; storing must not wait for the model

    async def query_vector(self, text: str) -> list[float] | None:
        """The query's vector, or ``None`` (no pgvector, model error, timeout): search is then lexical."""
        if not self.available:
            return None
        try:
            await asyncio.wait_for(self.ensure_ready(), self.query_timeout)
            return await asyncio.wait_for(self.embedder.embed_query(text), self.query_timeout)
        except (EmbeddingError, TimeoutError, asyncpg.PostgresError) as exc:
            log.warning("query embedding failed, ranking lexically: %r", exc)
            return None

    # ------------------------------------------------------------------ background writer

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            deadline = loop.time() + self.max_wait
            while len(batch) < self.batch_size:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), remaining))
                except TimeoutError:
                    break
            try:
                await self._embed_keys(batch)
            except Exception as exc:  # the writer must survive anything: reindex repairs gaps
                self.failed += len(batch)
                log.warning("could not embed %d memories (reindex will retry): %s", len(batch), exc)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _embed_keys(self, batch: list[tuple[str, str]]) -> None:
        await self.ensure_ready()
        users = [u for u, _ in batch]
        keys = [k for _, k in batch]
        rows = await self.pool.fetch(
            _FETCH_TEXT_SQL
            + """JOIN unnest($1::text[], $2::text[]) AS b(user_id, key)
                   ON b.user_id = m.user_id AND b.key = m.memory_key""",
            users,
            keys,
        )
        await self._embed_rows(rows)

    async def _salient_lines(self, row: asyncpg.Record) -> list[str]:
        """The failure lines of a long output (see ``_embedding_text``); none when it has none or they take too
        long to find (then its vector is made of its head and tail)."""
        if row["char_count"] <= HEAD_CHARS + TAIL_CHARS:
            return []
        async with self.pool.acquire() as conn:
            try:  # caught inside the acquire block: the pool would report any error escaping it as an outage
                async with conn.transaction():
                    await conn.execute(f"SET LOCAL statement_timeout = {SALIENT_TIMEOUT_MS}")
                    found = await conn.fetchval(SALIENT_LINES_SQL, row["id"], row["user_id"])
            except asyncpg.QueryCanceledError:
                log.info("failure lines of memory %s took over %d ms: embedded from its head", row["id"],
                         SALIENT_TIMEOUT_MS)  # fmt: skip
                return []
        return list(found or [])

    async def _embed_rows(self, rows: Sequence[asyncpg.Record]) -> int:
        if not rows:
            return 0
        texts = [
            embedding_text(r["description"], r["head"], r["tail"], r["char_count"], await self._salient_lines(r))
            for r in rows
        ]
        vectors = await self.embedder.embed(texts)
        model, dim = self.embedder.model_id, self.embedder.dimension
        await self.pool.execute(
            f"""
            INSERT INTO agent_memory_embeddings (memory_id, user_id, model, dim, content_sha256, embedding, recipe)
            SELECT v.memory_id, v.user_id, $3, $4, v.sha, v.vec::vector, {EMBEDDING_RECIPE}
            FROM unnest($1::uuid[], $2::text[], $5::text[], $6::text[]) AS v(memory_id, user_id, sha, vec)
            JOIN agent_memories m ON m.id = v.memory_id AND m.user_id = v.user_id  -- skip memories deleted meanwhile
            ON CONFLICT (memory_id, model) DO UPDATE
               SET embedding = EXCLUDED.embedding, content_sha256 = EXCLUDED.content_sha256, dim = EXCLUDED.dim,
                   recipe = EXCLUDED.recipe, created_at = now()
            """,
            [r["id"] for r in rows], [r["user_id"] for r in rows], model, dim,
            [r["content_sha256"] for r in rows], [vector_literal(v) for v in vectors],
        )  # fmt: skip
        return len(rows)

    # ------------------------------------------------------------------ reindex

    async def count_missing(self, *, user_pks: Sequence[str] | None = None) -> int:
        """Memories without a current vector in this space (none, of older content, or of an older recipe), of
        the users with these row ids (not login names; None: everyone)."""
        await self.ensure_ready()
        return int(
            await self.pool.fetchval(
                f"""SELECT count(*) FROM agent_memories m
                   WHERE m.is_active AND ($2::text[] IS NULL OR m.user_id = ANY($2))
                     AND {_LACKS_VECTOR}""",
                self.embedder.model_id,
                user_pks,
            )
        )

    async def reindex(
        self,
        *,
        user_pks: Sequence[str] | None = None,
        batch_size: int | None = None,
        prune: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> ReindexReport:
        """Embed every memory lacking a vector in the current space; ``progress(done, total)`` per batch.

        ``user_pks`` are the row ids (not login names) of the users in scope (None: everyone; the store resolves
        login names).
        ``prune`` also deletes vectors of other spaces (an old model or dimension) in scope.
        """
        if not self.available:
            raise EmbeddingError("the database has no pgvector extension: nothing to index (search is lexical)")
        await self.ensure_ready()
        model = self.embedder.model_id
        step = batch_size or self.batch_size
        total = await self.count_missing(user_pks=user_pks)
        done = failed = 0
        if progress:
            progress(0, total)
        last_id: str | None = None
        while True:
            # Keyset pagination over ids: stable while rows are added, and skips ones that failed.
            rows = await self.pool.fetch(
                _FETCH_TEXT_SQL
                + f"""WHERE m.is_active AND ($2::text[] IS NULL OR m.user_id = ANY($2))
                       AND ($3::uuid IS NULL OR m.id > $3)
                       AND {_LACKS_VECTOR}
                     ORDER BY m.id LIMIT $4""",
                model, user_pks, last_id, step,
            )  # fmt: skip
            if not rows:
                break
            last_id = str(rows[-1]["id"])
            try:
                done += await self._embed_rows(rows)
            except EmbeddingError as exc:
                failed += len(rows)
                log.warning("reindex: a batch of %d failed: %s", len(rows), exc)
            if progress:
                progress(done + failed, max(total, done + failed))
        pruned = 0
        if prune:
            status = await self.pool.execute(
                """DELETE FROM agent_memory_embeddings e
                   WHERE e.model <> $1 AND ($2::text[] IS NULL OR e.user_id = ANY($2))""",
                model,
                user_pks,
            )
            pruned = int(status.split()[-1])
        return ReindexReport(model=model, embedded=done, failed=failed, pruned=pruned, missing_before=total)


def vector_index_name(model_id: str) -> str:
    return "agent_memory_embeddings_hnsw_" + hashlib.sha1(model_id.encode()).hexdigest()[:12]


async def ensure_vector_index(pool: asyncpg.Pool, model_id: str, dim: int) -> None:
    """Create the HNSW cosine index of one vector space if it does not exist (idempotent, race-safe)."""
    name = vector_index_name(model_id)
    exists = await pool.fetchval("SELECT to_regclass($1) IS NOT NULL", name)
    if exists:
        return
    try:
        await pool.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON agent_memory_embeddings "
            f"USING hnsw ((embedding::vector({int(dim)})) vector_cosine_ops) WHERE model = {sql_literal(model_id)}"
        )
    except (asyncpg.DuplicateTableError, asyncpg.UniqueViolationError):
        pass  # another process created it at the same moment
