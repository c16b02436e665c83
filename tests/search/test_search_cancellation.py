"""Cancelling a search while its queries run leaves the pool's connections alive, on a real PostgreSQL.

With an embedder, :func:`agent_memory.search.hybrid_search` runs the lexical ranking on the connection the store
checked out (the one that resolved the user) while the query is embedded. Cancelled then, the search must wait
for that query to stop before the connection goes back to the pool: released mid-query, the pool would terminate
it and the search would end with asyncpg's InterfaceError instead of the cancellation.

The timing is made deterministic without sleeping for a guessed duration: the test double embedder holds the
query's embedding until told to go (no model is mocked away: it is an :class:`~agent_memory.search.Embedder`
whose query waits), and another session holds a lock on ``agent_memories``, so the lexical query is known to be
in flight (waiting on the server for the lock, as ``pg_locks`` shows) when the search is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import asyncpg
import pytest
from support.databases import fresh_database

from agent_memory import MemoryStore
from agent_memory.config import Settings
from agent_memory.search import Embedder

_DIM = 8
_LOCK_WAIT_TIMEOUT = 60.0  # seconds: a bound for a loaded machine, not a timing assumption


class GatedQueryEmbedder(Embedder):
    """Embeds documents at once; embedding a search query waits until :attr:`release` is set."""

    def __init__(self) -> None:
        self.query_started = asyncio.Event()
        self.release = asyncio.Event()

    @property
    def model_name(self) -> str:
        return "gated-query"

    @property
    def dimension(self) -> int:
        return _DIM

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * (_DIM - 1) for _ in texts]

    async def embed_query(self, text: str) -> list[float]:
        self.query_started.set()
        await self.release.wait()
        return (await self.embed([text]))[0]


async def _backend_waiting_on_memories(conn: asyncpg.Connection) -> int:
    """The pid of the one session waiting for a lock on ``agent_memories`` (pg_locks is read live, not from a
    per-transaction snapshot like pg_stat_activity)."""
    async with asyncio.timeout(_LOCK_WAIT_TIMEOUT):
        while True:
            pids = await conn.fetch(
                "SELECT pid FROM pg_locks WHERE NOT granted AND relation = 'agent_memories'::regclass"
            )
            if pids:
                assert len(pids) == 1, pids
                return int(pids[0]["pid"])
            await asyncio.sleep(0.01)  # poll until the condition holds


async def test_cancelling_a_search_waits_for_its_query_and_keeps_the_connection(
    database_url: str, user_id: str
) -> None:
    embedder = GatedQueryEmbedder()
    async with fresh_database(database_url, "am_cancel") as url:
        store = await MemoryStore.open(url, settings=Settings(database_url=url), embedder=embedder)
        locker = await asyncpg.connect(url)
        try:
            if store.embeddings is None or not store.embeddings.available:
                pytest.skip("this PostgreSQL server has no pgvector: search is lexical and starts no tasks")
            await store.store("write failed: disk full on /dev/sda1", user_id=user_id, description="df -h")
            await store.embeddings.flush()  # the background writer is idle from here on
            await store.embeddings.ensure_ready()

            lock = locker.transaction()
            await lock.start()
            await locker.execute("LOCK TABLE agent_memories IN ACCESS EXCLUSIVE MODE")
            search = asyncio.create_task(store.search("disk full", user_id=user_id))
            await embedder.query_started.wait()  # the query is being embedded (and waits) ...
            lexical_pid = await _backend_waiting_on_memories(locker)  # ... while the lexical query runs
            search.cancel()
            with pytest.raises(asyncio.CancelledError):
                await search
            await lock.rollback()

            # The connection that ran the cancelled query is alive and idle (back in the pool, not terminated).
            state = await locker.fetchval("SELECT state FROM pg_stat_activity WHERE pid = $1", lexical_pid)
            assert state == "idle"

            embedder.release.set()
            found = await store.search("disk full", user_id=user_id)  # the store still searches
            assert [i.description for i in found] == ["df -h"]
        finally:
            embedder.release.set()
            await locker.close()
            await store.close()
