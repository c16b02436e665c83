"""agent-memory behind PgBouncer in transaction mode (Debian's pgbouncer, two server connections for everyone)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator

import pytest
from support.databases import fresh_database
from support.pgbouncer import MISSING, PGBOUNCER, running_pgbouncer

from agent_memory import MemoryStore
from agent_memory.config import Settings
from agent_memory.errors import DatabaseUnavailable

pytestmark = pytest.mark.skipif(not os.path.exists(PGBOUNCER), reason=MISSING)


@pytest.fixture
async def own_database(database_url: str) -> AsyncIterator[str]:
    async with fresh_database(database_url, prefix="am_pgb") as url:
        yield url


@pytest.fixture
def bouncer_url(own_database: str) -> Iterator[str]:
    with running_pgbouncer(own_database, server_pool_size=2) as url:
        yield url


async def test_the_store_works_through_pgbouncer_in_transaction_mode(bouncer_url: str) -> None:
    settings = Settings(database_url=bouncer_url, database_pooler="pgbouncer")
    async with await MemoryStore.open(bouncer_url, settings=settings) as store:  # applies the schema through it
        keys = await asyncio.gather(*[
            store.store(f"deploy {n}: ERROR disk full on build-{n}", user_id=f"user-{n % 4}",
                        description=f"deploy {n}", memory_type="command_output")
            for n in range(40)
        ])  # fmt: skip
        hits = await asyncio.gather(*[store.search("disk full", user_id=f"user-{n}") for n in range(4)] * 5)
        await store.update(keys[0], user_id="user-0", content="fixed")
        await store.store("prefers blue-green deploys", user_id="user-0", memory_type="user_preference",
                          metadata={"subject": "deploy style"})  # fmt: skip
        newer = await store.store("prefers canary deploys", user_id="user-0", memory_type="user_preference",
                                  metadata={"subject": "deploy style"})  # fmt: skip
        current = await store.list(user_id="user-0", memory_type="user_preference")

    assert len(set(keys)) == 40
    assert all(len(h) == 5 for h in hits)  # each user's 10 deploys, best 5, through 2 server connections
    # the newer preference on the subject ended the older one (its advisory lock held within one transaction)
    assert [m.memory_key for m in current] == [newer]


async def test_without_the_pooler_setting_the_error_says_what_to_set(bouncer_url: str) -> None:
    with pytest.raises(DatabaseUnavailable, match="AGENT_MEMORY_DATABASE_POOLER=pgbouncer"):
        await MemoryStore.open(bouncer_url, settings=Settings(database_url=bouncer_url))


async def test_through_pgbouncer_a_statement_over_the_timeout_is_cancelled_by_the_client(bouncer_url: str) -> None:
    settings = Settings(database_url=bouncer_url, database_pooler="pgbouncer", statement_timeout_seconds=1)
    async with await MemoryStore.open(bouncer_url, settings=settings) as store:
        with pytest.raises(DatabaseUnavailable):
            await store.db.pool.fetchval("SELECT pg_sleep(5)")
        assert await store.db.pool.fetchval("SELECT 1") == 1  # the pooled connection is usable again
