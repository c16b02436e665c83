"""agent_memories partitioned by user (AGENT_MEMORY_PARTITIONS): the same behaviour, one partition per query."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from support.databases import fresh_database

from agent_memory import MemoryNotFound, MemoryStore
from agent_memory.config import Settings

PARTITIONS = 4
BURIED = "".join(f"step {n}: compiling module {n}\n" for n in range(1, 3000)) + "FATAL: linker ran out of disk\n"


@pytest.fixture
async def partitioned_url(database_url: str) -> AsyncIterator[str]:
    async with fresh_database(database_url, "am_part") as url:
        yield url


@pytest.fixture
async def partitioned(partitioned_url: str) -> AsyncIterator[MemoryStore]:
    settings = Settings(database_url=partitioned_url, embedder="none", partitions=PARTITIONS)
    async with await MemoryStore.open(partitioned_url, settings=settings) as store:
        yield store


async def test_a_fresh_database_gets_agent_memories_partitioned_by_user(partitioned: MemoryStore) -> None:
    pool = partitioned.db.pool
    assert await pool.fetchval("SELECT relkind::text FROM pg_class WHERE oid = 'agent_memories'::regclass") == "p"
    assert await pool.fetchval("SELECT pg_get_partkeydef('agent_memories'::regclass)") == "HASH (user_id)"
    assert (await partitioned.db.status())["partitions"] == PARTITIONS


async def test_an_existing_database_keeps_its_layout(partitioned_url: str) -> None:
    async with await MemoryStore.open(partitioned_url, settings=Settings(embedder="none")) as plain:
        assert (await plain.db.status())["partitions"] == 0
    async with await MemoryStore.open(partitioned_url, settings=Settings(embedder="none", partitions=8)) as again:
        assert (await again.db.status())["partitions"] == 0  # never converted behind the operator's back


async def test_search_works_on_a_parent_that_was_never_analyzed(partitioned: MemoryStore) -> None:
    for n in range(40):  # words every memory has: only the rare ones decide
        await partitioned.store(f"build {n} finished, build log attached", user_id="alice", description=f"build {n}")
    wanted = await partitioned.store("build finished with a flaky zookeeper timeout", user_id="alice",
                                     description="build with zookeeper timeout")  # fmt: skip
    long_key = await partitioned.store(BURIED, user_id="alice", description="release build log")
    await partitioned.store("quasar deploy of the billing service", user_id="bob", description="quasar deploy")
    pool = partitioned.db.pool
    assert await pool.fetchval("SELECT reltuples FROM pg_class WHERE oid = 'agent_memories'::regclass") == -1

    top = await partitioned.search("build zookeeper timeout", user_id="alice")
    assert top[0].memory_key == wanted
    [hit] = [i for i in await partitioned.search("linker ran out of disk", user_id="alice") if i.memory_key == long_key]
    start, end = map(int, (hit.matched_lines or "0-0").split("-"))
    assert start <= 3000 <= end  # the FATAL line
    assert await partitioned.search("quasar billing", user_id="alice") == []  # bob's words


async def test_a_users_query_reads_only_their_partition(partitioned: MemoryStore) -> None:
    await partitioned.store("anything", user_id="alice")
    analyzed = "\n".join(
        r[0] for r in await partitioned.db.pool.fetch(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT memory_key FROM agent_memories m "
            "WHERE m.user_id = (SELECT id FROM \"User\" WHERE identifier = 'alice') AND m.is_active"
        )
    )  # fmt: skip
    # the user id is known only when the query runs: every partition but the user's is pruned then
    assert analyzed.count("(never executed)") == PARTITIONS - 1


async def test_exact_content_versions_and_deletion_cascade_within_the_partition(partitioned: MemoryStore) -> None:
    content = "tab\there, NUL \x00 and emoji \U0001f600\n" + BURIED
    key = await partitioned.store(content, user_id="alice", description="odd bytes")
    assert await partitioned.retrieve(key, user_id="alice") == content
    with pytest.raises(MemoryNotFound):
        await partitioned.retrieve(key, user_id="bob")
    await partitioned.update(key, user_id="alice", content="short now")
    assert [v.version for v in await partitioned.history(key, user_id="alice")] == [1, 2]

    await partitioned.delete(key, user_id="alice")
    pool = partitioned.db.pool
    assert await pool.fetchval("SELECT count(*) FROM agent_memory_chunks") == 0
    assert await pool.fetchval("SELECT count(*) FROM agent_memory_versions") == 0


async def test_a_version_9_database_gets_the_user_keyed_references_in_place(partitioned_url: str) -> None:
    async with await MemoryStore.open(partitioned_url, settings=Settings(embedder="none")) as store:
        key = await store.store("v1", user_id="alice", memory_type="note")
        await store.update(key, user_id="alice", content="v2 " + BURIED)
    conn = await asyncpg.connect(partitioned_url)
    try:  # back to what version 9 had: references by memory id alone, versions without their user
        for table in ("agent_memory_versions", "agent_memory_chunks"):
            await conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_memory_fkey")
            await conn.execute(f"ALTER TABLE {table} ADD CONSTRAINT {table}_memory_id_fkey FOREIGN KEY (memory_id) "
                               "REFERENCES agent_memories (id) ON DELETE CASCADE")  # fmt: skip
        await conn.execute("ALTER TABLE agent_memory_versions DROP COLUMN user_id")
        await conn.execute("UPDATE agent_memory_schema SET version = 9")
    finally:
        await conn.close()

    async with await MemoryStore.open(partitioned_url, settings=Settings(embedder="none")) as store:
        assert await store.db.schema_version() == 12
        names = {r[0] for r in await store.db.pool.fetch("SELECT conname FROM pg_constraint WHERE contype = 'f'")}
        assert {"agent_memory_versions_memory_fkey", "agent_memory_chunks_memory_fkey"} <= names
        assert not {"agent_memory_versions_memory_id_fkey", "agent_memory_chunks_memory_id_fkey"} & names
        assert [v.version for v in await store.history(key, user_id="alice")] == [1, 2]
        assert await store.retrieve_version(key, 1, user_id="alice") == "v1"
