"""sql/postgresdb.sql applies to fresh and initialised databases; connection errors are actionable."""

from __future__ import annotations

import asyncio
import os
import pwd
import re
import secrets
import subprocess
from collections.abc import AsyncIterator

import asyncpg
import pytest
from support.databases import fresh_database

from agent_memory import MemoryStore
from agent_memory.config import Settings
from agent_memory.errors import DatabaseUnavailable
from agent_memory.store import Database, redact_url, schema_sql
from agent_memory.store._db import ensure_server_os_user

CHAINLIT_TABLES = {"User", "Thread", "Step", "Element", "Feedback"}


@pytest.fixture
async def fresh_database_url(database_url: str) -> AsyncIterator[str]:
    async with fresh_database(database_url, "am_fresh") as url:
        yield url


async def _tables(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {r["tablename"] for r in rows}
    finally:
        await conn.close()


async def test_schema_applies_to_a_fresh_database(fresh_database_url: str) -> None:
    db = await Database.connect(fresh_database_url, settings=Settings())
    try:
        assert await db.schema_version() >= 1
        assert await db.has_extension("pg_trgm")
    finally:
        await db.close()
    assert CHAINLIT_TABLES | {"agents", "agent_memories", "agent_memory_schema"} <= await _tables(fresh_database_url)


async def test_schema_applies_again_to_an_initialised_database_keeping_data(fresh_database_url: str) -> None:
    first = await MemoryStore.open(fresh_database_url, settings=Settings())
    key = await first.store("survives re-apply", user_id="alice")
    await first.db.apply_schema()  # same process, again
    await first.close()
    second = await MemoryStore.open(fresh_database_url, settings=Settings())  # a new start applies it once more
    try:
        assert await second.retrieve(key, user_id="alice") == "survives re-apply"
        assert await second.db.schema_version() >= 1
    finally:
        await second.close()


async def test_a_start_on_a_current_schema_takes_no_table_lock_that_live_writes_hold(fresh_database_url: str) -> None:
    await (await Database.connect(fresh_database_url, settings=Settings())).close()  # the schema is now current
    writer = await asyncpg.connect(fresh_database_url)
    try:
        async with writer.transaction():  # a write in flight in another process: ROW EXCLUSIVE on agent_memories
            await writer.execute("LOCK TABLE agent_memories IN ROW EXCLUSIVE MODE")
            # Re-applying the schema would wait for it (ALTER TABLE locks even when it changes nothing) and, with
            # several writers, deadlock with them; a start that finds the schema current applies nothing.
            db = await asyncio.wait_for(Database.connect(fresh_database_url, settings=Settings()), timeout=20)
            await db.close()
    finally:
        await writer.close()


async def test_a_start_enables_an_extension_that_became_available(fresh_database_url: str) -> None:
    await (await Database.connect(fresh_database_url, settings=Settings())).close()
    conn = await asyncpg.connect(fresh_database_url)
    try:  # as if btree_gin had been installed on the server since the last start
        if not await conn.fetchval("SELECT count(*) FROM pg_available_extensions WHERE name = 'btree_gin'"):
            pytest.skip("this server has no btree_gin")
        await conn.execute("DROP EXTENSION btree_gin CASCADE")
    finally:
        await conn.close()
    db = await Database.connect(fresh_database_url, settings=Settings())
    try:
        assert await db.has_extension("btree_gin")
    finally:
        await db.close()


_V8_COLUMNS = ("version", "status", "status_reason", "subject", "valid_from", "valid_until", "expires_at", "updated_at")


async def test_a_version_7_database_upgrades_to_the_lifecycle_schema_in_place(fresh_database_url: str) -> None:
    async with await MemoryStore.open(fresh_database_url, settings=Settings()) as store:
        key = await store.store("stored before the upgrade", user_id="alice", memory_type="user_fact")
        created = (await store.get(key, user_id="alice")).created_at
    conn = await asyncpg.connect(fresh_database_url)
    try:  # back to what version 7 had: no lifecycle columns or tables
        await conn.execute("DROP TABLE agent_memory_versions, agent_memory_audit")
        await conn.execute("ALTER TABLE agent_memories DROP CONSTRAINT agent_memories_status_check")
        for column in _V8_COLUMNS:
            await conn.execute(f"ALTER TABLE agent_memories DROP COLUMN {column}")
        await conn.execute("UPDATE agent_memory_schema SET version = 7")
    finally:
        await conn.close()

    async with await MemoryStore.open(fresh_database_url, settings=Settings()) as store:
        item = await store.get(key, user_id="alice")
        assert await store.db.schema_version() == 12
        assert (item.version, item.status, item.valid_from, item.valid_until) == (1, "held", created, None)
        assert await store.retrieve(key, user_id="alice") == "stored before the upgrade"
        assert (await store.update(key, user_id="alice", content="after")).version == 2


async def test_schema_file_is_one_transaction_safe_script() -> None:
    sql = schema_sql()
    assert "DROP TABLE" not in sql.upper()
    assert "CREATE TABLE IF NOT EXISTS agent_memories" in sql


async def test_deleting_a_chainlit_user_cascades_to_memories(store: MemoryStore, user_id: str) -> None:
    await store.store("x", user_id=user_id)
    async with store.db.pool.acquire() as conn:
        await conn.execute('DELETE FROM "User" WHERE identifier = $1', user_id)
    assert await store.list(user_id=user_id) == []


async def test_memory_key_is_unique_per_user_in_the_schema(store: MemoryStore, user_id: str) -> None:
    key = await store.store("x", user_id=user_id)
    async with store.db.pool.acquire() as conn:
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute(
                """INSERT INTO agent_memories (user_id, memory_key, content, content_sha256)
                   SELECT user_id, memory_key, 'dup', repeat('0', 64) FROM agent_memories WHERE memory_key = $1""",
                key,
            )


async def test_unreachable_server_gives_actionable_error_without_password() -> None:
    url = "postgresql://agent:s3cret-pw@127.0.0.1:1/agentdb"
    with pytest.raises(DatabaseUnavailable) as err:
        await Database.connect(url, settings=Settings())
    message = str(err.value)
    assert "s3cret-pw" not in message
    assert "127.0.0.1:1" in message and "AGENT_MEMORY_DATABASE_URL" in message


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgres://u:pw@[::1:1/db", "Invalid IPv6 URL"),
        ("postgresql://u@h:99999/db", "Port out of range"),
        ("mysql://u@h/db", "must start with postgresql://"),
    ],
)
async def test_a_database_url_that_cannot_be_parsed_is_refused_naming_the_setting(
    url: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", url)
    with pytest.raises(ValueError, match=f"^AGENT_MEMORY_DATABASE_URL .*{re.escape(says)}"):
        await Database.connect(settings=Settings())


def test_redact_url_hides_only_the_password() -> None:
    assert redact_url("postgresql://u:p%40ss@db:5432/x") == "postgresql://u:***@db:5432/x"
    assert redact_url("postgresql://u@db/x") == "postgresql://u@db/x"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u@db/x?password=s3cret", "postgresql://u@db/x?password=***"),
        (
            "postgresql://u@db/x?sslmode=require&password=s3cret&port=5",
            "postgresql://u@db/x?sslmode=require&password=***&port=5",
        ),
        ("postgresql://u:a@db/x?sslpassword=k3y", "postgresql://u:***@db/x?sslpassword=***"),
        ("postgresql:///x?host=/run/pg&passfile=/p", "postgresql:///x?host=/run/pg&passfile=/p"),
    ],
)
def test_redact_url_hides_passwords_given_as_parameters(url: str, shown: str) -> None:
    assert redact_url(url) == shown


async def test_embedded_server_requires_its_password(tmp_path_factory: pytest.TempPathFactory) -> None:
    from agent_memory.store import start_embedded_server

    home = tmp_path_factory.mktemp("pw")
    server = await start_embedded_server(home)
    password = (home / "db-password").read_text().strip()
    assert password and f":{password}@" in server.uri
    assert (home / "db-password").stat().st_mode & 0o077 == 0  # only the owner can read it
    without_password = server.uri.replace(f":{password}@", ":@")
    with pytest.raises((asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError)):
        await asyncpg.connect(without_password)
    conn = await asyncpg.connect(server.uri)
    await conn.close()
    again = await start_embedded_server(home)  # a second start reuses the same password
    assert again.uri == server.uri


@pytest.mark.skipif(os.geteuid() != 0, reason="creating an OS user needs root")
def test_the_servers_os_user_is_created_even_when_path_lacks_sbin() -> None:
    name = f"am_test_{secrets.token_hex(3)}"
    try:
        ensure_server_os_user(name, search_path="/usr/bin:/bin")  # a service's PATH without /usr/sbin (useradd)
        assert pwd.getpwnam(name).pw_name == name
    finally:
        subprocess.run(["/usr/sbin/userdel", name], capture_output=True)


def test_a_bad_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.config import SettingsError, get_settings

    monkeypatch.setenv("AGENT_MEMORY_POOL_MAX_SIZE", "abc")
    with pytest.raises(SettingsError, match=r"AGENT_MEMORY_POOL_MAX_SIZE='abc': Input should be a valid integer"):
        get_settings()
