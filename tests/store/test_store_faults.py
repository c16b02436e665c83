"""Database faults become one clear DatabaseUnavailable error, logged once per outage; nothing is lost."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from support.databases import fresh_database, open_store
from support.db_proxy import DatabaseProxy, database_proxy

from agent_memory import MemoryStore
from agent_memory.errors import DatabaseUnavailable


@pytest.fixture
async def own_database(database_url: str) -> AsyncIterator[str]:
    async with fresh_database(database_url, prefix="am_faults") as url:
        yield url


@pytest.fixture
def proxy(own_database: str) -> Iterator[DatabaseProxy]:
    with database_proxy(own_database) as p:
        yield p


async def test_a_statement_stuck_behind_a_lock_ends_at_the_statement_timeout(own_database: str, user_id: str) -> None:
    store = await open_store(own_database, statement_timeout_seconds=1)
    try:
        key = await store.store("kept", user_id=user_id)
        locker = await asyncpg.connect(own_database)
        try:
            async with locker.transaction():
                await locker.execute("LOCK TABLE agent_memories IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(DatabaseUnavailable, match=r"did not answer within 1 s.*STATEMENT_TIMEOUT"):
                    await store.retrieve(key, user_id=user_id)
        finally:
            await locker.close()
        assert await store.retrieve(key, user_id=user_id) == "kept"
    finally:
        await store.close()


async def test_a_full_disk_is_a_clear_error_that_does_not_advise_deleting_data(own_database: str, user_id: str) -> None:
    store = await open_store(own_database)
    try:
        kept = await store.store("stored before the disk filled", user_id=user_id)
        admin = await asyncpg.connect(own_database)
        try:  # PostgreSQL's own disk_full error (SQLSTATE 53100), raised where a real one would be: on the INSERT
            await admin.execute(
                "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$;"
                "CREATE TRIGGER no_space_left BEFORE INSERT ON agent_memories FOR EACH ROW EXECUTE FUNCTION disk_full()"
            )
        finally:
            await admin.close()
        with pytest.raises(DatabaseUnavailable, match="disk is full") as refused:
            await store.store("new content", user_id=user_id)
        assert "do not delete the data directory" in str(refused.value)
        assert await store.retrieve(kept, user_id=user_id) == "stored before the disk filled"
    finally:
        await store.close()


async def test_an_outage_is_a_clear_error_and_requests_work_again_when_it_ends(
    proxy: DatabaseProxy, user_id: str
) -> None:
    store = await open_store(proxy.url)
    try:
        key = await store.store("survives the outage", user_id=user_id)
        proxy.cut()
        with pytest.raises(DatabaseUnavailable, match="database is unreachable"):
            await store.retrieve(key, user_id=user_id)
        proxy.restore()
        assert await store.retrieve(key, user_id=user_id) == "survives the outage"
    finally:
        await store.close()


async def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    proxy: DatabaseProxy, user_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store(proxy.url)
    try:
        key = await store.store("x", user_id=user_id)
        caplog.set_level(logging.INFO)
        proxy.cut()
        for _ in range(20):
            with pytest.raises(DatabaseUnavailable):
                await store.retrieve(key, user_id=user_id)
        proxy.restore()
        await store.retrieve(key, user_id=user_id)
        await store.retrieve(key, user_id=user_id)
    finally:
        await store.close()
    ours = [r for r in caplog.records if r.name == "agent_memory.database"]
    assert [r.levelname for r in ours] == ["WARNING", "INFO"]
    assert "unreachable" in ours[0].getMessage() and "answers again" in ours[1].getMessage()
    assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.WARNING]


async def test_errors_that_are_not_faults_pass_unchanged(store: MemoryStore, user_id: str) -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        await store.search("disk \udc80 full", user_id=user_id)
