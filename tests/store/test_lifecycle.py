"""Memory lifecycle: versions, facts that change over time, retraction, expiry, audit, export/import, forget."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from support.databases import fresh_database, open_store

from agent_memory import MemoryNotFound, MemoryStore

NUL_CONTENT = "line 1\x00\r\nline 2 \\0 ✅\n"


async def test_update_keeps_the_key_and_every_earlier_version_byte_for_byte(store: MemoryStore, user_id: str) -> None:
    key = await store.store(NUL_CONTENT, user_id=user_id, description="v1")
    item = await store.update(key, user_id=user_id, content="second\n", actor="alice", surface="cli")

    assert item.memory_key == key and item.version == 2 and item.description == "v1"
    assert await store.retrieve(key, user_id=user_id) == "second\n"
    assert await store.retrieve_version(key, 1, user_id=user_id) == NUL_CONTENT
    assert await store.retrieve_version(key, 2, user_id=user_id) == "second\n"


async def test_history_lists_versions_with_who_when_and_through_what(store: MemoryStore, user_id: str) -> None:
    key = await store.store("a", user_id=user_id, description="first", actor="coder", surface="agent")
    await store.update(key, user_id=user_id, description="second", actor="alice", surface="mcp")

    history = await store.history(key, user_id=user_id)

    assert [(v.version, v.current, v.description, v.actor, v.surface) for v in history] == [
        (1, False, "first", "coder", "agent"),
        (2, True, "second", "alice", "mcp"),
    ]
    assert history[0].written_at <= history[1].written_at


async def test_another_users_key_cannot_be_updated_retracted_or_read_in_history(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    key = await store.store("mine", user_id=user_id)
    with pytest.raises(MemoryNotFound):
        await store.update(key, user_id=other_user_id, content="theirs")
    with pytest.raises(MemoryNotFound):
        await store.retract(key, user_id=other_user_id, reason="because")
    with pytest.raises(MemoryNotFound):
        await store.history(key, user_id=other_user_id)
    assert await store.retrieve(key, user_id=user_id) == "mine"


async def test_a_retracted_memory_leaves_search_lists_and_the_user_layer_but_stays_retrievable(
    store: MemoryStore, user_id: str
) -> None:
    key = await store.store("prefers vim keybindings", user_id=user_id, description="editor: vim",
                            memory_type="user_preference")  # fmt: skip
    retracted = await store.retract(key, user_id=user_id, reason="the user said it was a joke")

    assert retracted.status == "retracted" and retracted.status_reason == "the user said it was a joke"
    assert await store.search("vim keybindings", user_id=user_id, min_score=0.0) == []
    assert await store.list(user_id=user_id) == []
    assert await store.standing_memories(user_id=user_id) == []
    assert await store.retrieve(key, user_id=user_id) == "prefers vim keybindings"
    assert (await store.get(key, user_id=user_id)).status == "retracted"


async def test_a_newer_fact_on_the_same_subject_ends_the_older_one(store: MemoryStore, user_id: str) -> None:
    old = await store.store("Lyon", user_id=user_id, description="home city: Lyon", memory_type="user_fact")
    new = await store.store("Paris", user_id=user_id, description="Home City: Paris", memory_type="user_fact")

    layer = [item.memory_key for item, _ in await store.standing_memories(user_id=user_id)]
    assert layer == [new]
    ended = await store.get(old, user_id=user_id)
    assert ended.subject == "home city" and ended.valid_until == (await store.get(new, user_id=user_id)).valid_from


async def test_as_of_shows_what_held_then(store: MemoryStore, user_id: str) -> None:
    old = await store.store("Lyon", user_id=user_id, description="home city", memory_type="user_fact")
    between = (await store.get(old, user_id=user_id)).valid_from + timedelta(microseconds=1)
    new = await store.store("Paris", user_id=user_id, description="home city", memory_type="user_fact")

    assert [i.memory_key for i in await store.list(user_id=user_id, as_of=between)] == [old]
    assert [i.memory_key for i in await store.list(user_id=user_id)] == [new]


async def test_a_hundred_preference_changes_leave_no_stale_fact_in_the_user_layer(
    store: MemoryStore, user_id: str
) -> None:
    latest: dict[str, str] = {}
    for change in range(100):
        subject = f"setting {change % 10}"
        latest[subject] = await store.store(f"value {change}", user_id=user_id, description=f"{subject}: value",
                                            memory_type="user_preference")  # fmt: skip

    layer = await store.standing_memories(user_id=user_id, limit=200)

    assert sorted(item.memory_key for item, _ in layer) == sorted(latest.values())
    assert len(await store.list(user_id=user_id, memory_type="user_preference", limit=200)) == 10


async def test_equal_strength_contradictions_are_both_marked_contested(store: MemoryStore, user_id: str) -> None:
    when = datetime.now(UTC) - timedelta(hours=1)
    a = await store.store("tabs", user_id=user_id, description="indent", memory_type="user_preference", valid_from=when)
    b = await store.store("spaces", user_id=user_id, description="indent", memory_type="user_preference",
                          valid_from=when)  # fmt: skip

    items = {i.memory_key: i for i in await store.list(user_id=user_id)}
    assert set(items) == {a, b}
    assert {i.status for i in items.values()} == {"contested"}


async def test_a_backdated_fact_is_history_and_does_not_replace_the_current_one(
    store: MemoryStore, user_id: str
) -> None:
    current = await store.store("Paris", user_id=user_id, description="home city", memory_type="user_fact")
    older = await store.store("Lyon", user_id=user_id, description="home city", memory_type="user_fact",
                              valid_from=datetime.now(UTC) - timedelta(days=365))  # fmt: skip

    assert [i.memory_key for i in await store.list(user_id=user_id)] == [current]
    assert (await store.get(older, user_id=user_id)).valid_until == (
        await store.get(current, user_id=user_id)
    ).valid_from


async def test_an_expired_memory_is_gone_for_every_read_and_purge_deletes_it(store: MemoryStore, user_id: str) -> None:
    key = await store.store("short-lived", user_id=user_id, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    kept = await store.store("kept", user_id=user_id)

    with pytest.raises(MemoryNotFound):
        await store.retrieve(key, user_id=user_id)
    assert [i.memory_key for i in await store.list(user_id=user_id)] == [kept]
    assert await store.purge_expired(user_id=user_id) == 1
    assert [e.action for e in await store.audit_log(user_id=user_id, key=key)] == ["purge", "store"]


async def test_a_ttl_per_memory_type_sets_the_expiry(database_url: str, user_id: str) -> None:
    async with await open_store(database_url, ttl_days={"command_output": 30}) as store:
        log = await store.store("npm install ...", user_id=user_id, memory_type="command_output")
        note = await store.store("a note", user_id=user_id)
        expires = (await store.get(log, user_id=user_id)).expires_at
        assert expires is not None and timedelta(days=29) < expires - datetime.now(UTC) <= timedelta(days=30)
        assert (await store.get(note, user_id=user_id)).expires_at is None


async def test_every_change_has_exactly_one_audit_row(store: MemoryStore, user_id: str) -> None:
    key = await store.store("x", user_id=user_id, actor="coder", surface="agent")
    await store.update(key, user_id=user_id, content="y", actor="alice", surface="cli")
    await store.retract(key, user_id=user_id, reason="wrong", actor="alice", surface="mcp")
    await store.delete(key, user_id=user_id, actor="alice", surface="ui")

    log = await store.audit_log(user_id=user_id, key=key)

    assert [(e.action, e.actor, e.surface) for e in reversed(log)] == [
        ("store", "coder", "agent"), ("update", "alice", "cli"), ("retract", "alice", "mcp"), ("delete", "alice", "ui"),
    ]  # fmt: skip
    assert log[1].reason == "wrong"


async def test_another_users_audit_is_not_visible(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    await store.store("x", user_id=user_id)
    assert await store.audit_log(user_id=other_user_id) == []


@pytest.fixture
async def second_database(database_url: str) -> AsyncIterator[MemoryStore]:
    async with fresh_database(database_url, prefix="am_import") as url, await open_store(url) as other:
        yield other


async def _everything(store: MemoryStore, user_id: str) -> str:
    key = await store.store(NUL_CONTENT, user_id=user_id, description="log", memory_type="command_output",
                            metadata={"exit": 1})  # fmt: skip
    await store.update(key, user_id=user_id, content="v2 \x00", description="log v2")
    await store.store("Lyon", user_id=user_id, description="home city", memory_type="user_fact")
    await store.store("Paris", user_id=user_id, description="home city", memory_type="user_fact")
    retracted = await store.store("joke", user_id=user_id, description="pet: dragon", memory_type="user_fact")
    await store.retract(retracted, user_id=user_id, reason="a joke")
    return key


def _memory_lines(lines: list[str]) -> list[str]:
    return lines[1:]  # the header names the user and the time of export


async def test_export_then_import_into_another_database_and_user_is_identical(
    store: MemoryStore, second_database: MemoryStore, user_id: str, other_user_id: str
) -> None:
    key = await _everything(store, user_id)
    exported = [line async for line in store.export(user_id=user_id)]

    imported = await second_database.import_lines(exported, user_id=other_user_id)
    again = [line async for line in second_database.export(user_id=other_user_id)]

    assert len(imported) == 4 and json.loads(exported[0])["memories"] == 4
    assert _memory_lines(again) == _memory_lines(exported)
    assert await second_database.retrieve_version(key, 1, user_id=other_user_id) == NUL_CONTENT
    assert await second_database.retrieve(key, user_id=other_user_id) == "v2 \x00"


async def test_import_refuses_keys_the_user_already_has_and_changes_nothing(store: MemoryStore, user_id: str) -> None:
    await store.store("x", user_id=user_id)
    exported = [line async for line in store.export(user_id=user_id)]
    with pytest.raises(ValueError, match="already has 1 of these keys"):
        await store.import_lines(exported, user_id=user_id)
    assert len(await store.list(user_id=user_id)) == 1


async def test_import_refuses_altered_content(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    await store.store("original", user_id=user_id)
    header, line = [line async for line in store.export(user_id=user_id)]
    altered = json.dumps({**json.loads(line), "content": "altered"})
    with pytest.raises(ValueError, match="content_sha256"):
        await store.import_lines([header, altered], user_id=other_user_id)
    assert await store.list(user_id=other_user_id) == []


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"version": -3}, "version -3 is not a positive integer"),
        ({"version": "2"}, "version '2' is not a positive integer"),
        ({"created_at": "9999-12-31T00:00:00+00:00"}, "created_at '9999-12-31T00:00:00\\+00:00' is in the future"),
        ({"valid_from": "9999-12-31T00:00:00+00:00"}, "valid_from .* is in the future"),
    ],
)
async def test_import_refuses_impossible_versions_and_times(
    store: MemoryStore, user_id: str, other_user_id: str, change: dict[str, object], refusal: str
) -> None:
    # A fact dated in the future would outrank every newer fact on its subject, forever.
    await store.store("fact", user_id=user_id, memory_type="user_fact")
    header, line = [line async for line in store.export(user_id=user_id)]
    with pytest.raises(ValueError, match=refusal):
        await store.import_lines([header, json.dumps({**json.loads(line), **change})], user_id=other_user_id)
    assert await store.list(user_id=other_user_id) == []


async def test_import_keeps_an_expiry_in_the_future(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    future = "2999-01-01T00:00:00+00:00"
    await store.store("a reminder", user_id=user_id)
    header, line = [line async for line in store.export(user_id=user_id)]
    expiring = json.dumps({**json.loads(line), "expires_at": future})
    [key] = await store.import_lines([header, expiring], user_id=other_user_id)
    assert (await store.get(key, user_id=other_user_id)).expires_at.year == 2999


async def test_import_refuses_a_file_that_is_not_an_export(store: MemoryStore, user_id: str) -> None:
    with pytest.raises(ValueError, match="not an agent-memory/export"):
        await store.import_lines(['{"hello": 1}'], user_id=user_id)


async def test_forget_user_leaves_no_row_and_returns_a_receipt(store: MemoryStore, user_id: str) -> None:
    await _everything(store, user_id)
    receipt = await store.forget_user_receipt(user_id)

    assert receipt["memories"] == 4 and receipt["memory_versions"] == 1 and receipt["audit_rows"] == 6
    conn = await asyncpg.connect(store.db.url)
    try:
        left = await conn.fetchval(
            'SELECT count(*) FROM agent_memories m JOIN "User" u ON u.id = m.user_id WHERE u.identifier = $1', user_id
        )
        forget_rows = await conn.fetchval(
            "SELECT count(*) FROM agent_memory_audit WHERE action = 'forget' AND user_id IS NULL "
            "AND details->>'user_sha256' = encode(sha256($1::bytea), 'hex')",
            user_id.encode(),
        )
    finally:
        await conn.close()
    assert left == 0 and forget_rows == 1
    assert not await store.user_exists(user_id)
