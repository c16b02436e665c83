"""A chat step belongs to its thread: a client-chosen step id cannot move another user's message into one's own.

Chainlit takes a chat message's id from the client and upserts it (``ON CONFLICT (id) DO UPDATE``, thread
included). Driven here through the UI's data layer, as Chainlit's message handler calls it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from chainlit.context import init_http_context

from agent_memory import MemoryStore
from chainlit_app import runtime
from chainlit_app.runtime import AgentMemoryDataLayer

pytestmark = [pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
async def layer(
    ui_database: str, ui_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[AgentMemoryDataLayer]:
    monkeypatch.setattr(runtime, "_store", ui_store)  # the UI process's store, on this module's database
    init_http_context()  # as in a request: steps are written at once, not queued for a first message
    data_layer = AgentMemoryDataLayer(database_url=ui_database)
    yield data_layer
    if data_layer.pool is not None:
        await data_layer.pool.close()


async def _thread_with_a_step(store: MemoryStore, owner: str, text: str) -> tuple[str, str]:
    await store.store("makes sure the user exists", user_id=owner)
    pool = store.db.pool
    user_pk = await pool.fetchval('SELECT id FROM "User" WHERE identifier = $1', owner)
    thread_id, step_id = str(uuid.uuid4()), str(uuid.uuid4())
    await pool.execute('INSERT INTO "Thread" (id, "userId", name) VALUES ($1, $2, $3)', thread_id, user_pk, "t")
    await pool.execute(
        'INSERT INTO "Step" (id, "threadId", name, type, output, "startTime", "endTime") '
        "VALUES ($1, $2, 'User', 'user_message', $3, now(), now())",
        step_id, thread_id, text,
    )  # fmt: skip
    return thread_id, step_id


def _message(step_id: str, thread_id: str, text: str) -> dict[str, object]:
    return {"id": step_id, "threadId": thread_id, "name": "User", "type": "user_message", "output": text,
            "createdAt": "2026-11-26T00:00:00.000Z", "metadata": {}}  # fmt: skip


async def test_a_message_with_another_users_step_id_leaves_that_step_where_it_was(
    layer: AgentMemoryDataLayer, ui_store: MemoryStore
) -> None:
    bob_thread, bob_step = await _thread_with_a_step(ui_store, "bob-own", "bob's words")
    mallory_thread, _ = await _thread_with_a_step(ui_store, "mallory-own", "hello")

    await layer.create_step(_message(bob_step, mallory_thread, "written by mallory"))
    await layer.update_step(_message(bob_step, mallory_thread, ""))

    row = await ui_store.db.pool.fetchrow('SELECT "threadId", output FROM "Step" WHERE id = $1', bob_step)
    assert (row["threadId"], row["output"]) == (bob_thread, "bob's words")


async def test_a_step_of_ones_own_thread_is_still_written_and_updated(
    layer: AgentMemoryDataLayer, ui_store: MemoryStore
) -> None:
    thread, step = await _thread_with_a_step(ui_store, "carol-own", "first")
    await layer.update_step(_message(step, thread, "edited"))
    new_step = str(uuid.uuid4())
    await layer.create_step(_message(new_step, thread, "second"))
    rows = await ui_store.db.pool.fetch('SELECT id, output FROM "Step" WHERE "threadId" = $1', thread)
    assert {r["id"]: r["output"] for r in rows} == {step: "edited", new_step: "second"}


async def test_an_update_naming_no_thread_cannot_rewrite_another_users_step(
    layer: AgentMemoryDataLayer, ui_store: MemoryStore
) -> None:
    # Chainlit keeps the step's thread when the update names none, and writes the new content.
    bob_thread, bob_step = await _thread_with_a_step(ui_store, "bob-none", "bob's words")
    mallory_thread, _ = await _thread_with_a_step(ui_store, "mallory-none", "hello")
    init_http_context(thread_id=mallory_thread)  # mallory's session

    await layer.update_step({**_message(bob_step, mallory_thread, "rewritten by mallory"), "threadId": None})

    row = await ui_store.db.pool.fetchrow('SELECT "threadId", output FROM "Step" WHERE id = $1', bob_step)
    assert (row["threadId"], row["output"]) == (bob_thread, "bob's words")


async def test_an_update_naming_no_thread_changes_a_step_of_the_sessions_thread(
    layer: AgentMemoryDataLayer, ui_store: MemoryStore
) -> None:
    thread, step = await _thread_with_a_step(ui_store, "carol-none", "streaming")
    init_http_context(thread_id=thread)

    await layer.update_step({**_message(step, thread, "done"), "threadId": None})

    assert await ui_store.db.pool.fetchval('SELECT output FROM "Step" WHERE id = $1', step) == "done"
