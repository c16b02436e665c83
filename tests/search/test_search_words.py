"""The parts of paths, URLs and image references are words: search finds them (PostgreSQL alone does not)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from support.databases import fresh_database

from agent_memory import MemoryStore
from agent_memory.config import Settings

BUILD = "$ docker build -t registry.bluehaul.example/fleettrack:e58bc3a .\n#1 [internal] load build definition\nDONE"
TAIL = "$ tail -n 3 /var/log/nginx/error.log\n2026/11/25 upstream timed out (110) while reading response header\n"


async def keys(store: MemoryStore, query: str, user_id: str) -> list[str]:
    return [i.memory_key for i in await store.search(query, user_id=user_id)]


async def test_an_image_tag_and_name_inside_a_reference_are_found(store: MemoryStore, user_id: str) -> None:
    key = await store.store(BUILD, user_id=user_id, description="container build")
    await store.store("unrelated build log without tags", user_id=user_id, description="another build")

    assert (await keys(store, "e58bc3a", user_id))[:1] == [key]
    assert (await keys(store, "fleettrack image", user_id))[:1] == [key]


async def test_a_directory_inside_a_path_is_found(store: MemoryStore, user_id: str) -> None:
    key = await store.store(TAIL, user_id=user_id, description="error log tail")

    assert (await keys(store, "nginx errors", user_id))[:1] == [key]
    assert (await keys(store, "/var/log/nginx/error.log", user_id))[:1] == [key]  # the whole path still works


async def test_a_path_deep_in_a_long_output_is_found_with_its_lines(store: MemoryStore, user_id: str) -> None:
    lines = [f"copied asset {n}" for n in range(1, 1500)] + ["wrote /srv/shop/releases/r8841/manifest.json"]
    key = await store.store("\n".join(lines), user_id=user_id, description="deploy output")

    [hit] = [i for i in await store.search("r8841 manifest", user_id=user_id) if i.memory_key == key]
    assert hit.matched_lines is not None


@pytest.fixture
async def fresh_url(database_url: str) -> AsyncIterator[str]:
    async with fresh_database(database_url, "am_words") as url:
        yield url


async def test_a_version_10_database_indexes_the_parts_of_what_it_already_holds(fresh_url: str) -> None:
    settings = Settings(database_url=fresh_url, embedder="none")
    async with await MemoryStore.open(fresh_url, settings=settings) as store:
        key = await store.store(BUILD, user_id="alice", description="container build")
    conn = await asyncpg.connect(fresh_url)
    try:  # back to version 10: paths and references indexed whole
        await conn.execute("ALTER TABLE agent_memories DROP COLUMN search_vector")
        await conn.execute("""ALTER TABLE agent_memories ADD COLUMN search_vector TSVECTOR GENERATED ALWAYS AS (
            setweight(to_tsvector('english', coalesce(description, '')), 'A')
            || setweight(to_tsvector('english', left(content, 100000)), 'B')) STORED""")
        await conn.execute("UPDATE agent_memory_schema SET version = 10")
    finally:
        await conn.close()

    async with await MemoryStore.open(fresh_url, settings=settings) as store:
        assert await store.db.schema_version() == 12
        assert (await keys(store, "e58bc3a", "alice"))[:1] == [key]
