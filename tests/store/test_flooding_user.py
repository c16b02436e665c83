"""One user's flood of costly requests costs that user time, never other users (per-process slots, query caps)."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from agent_memory import MemoryStore
from agent_memory.search._hybrid import MAX_QUERY_WORDS


async def _until_waiting(store: MemoryStore, user_id: str, count: int) -> None:
    for _ in range(10_000):  # yield to the event loop until the search queues (no wall-clock wait)
        if store.search_slots.waiting(user_id) == count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{user_id}'s search never waited for a slot")


async def test_a_users_searches_beyond_their_slots_wait_while_other_users_search(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    await store.store("disk full on build-01", user_id=user_id, description="df")
    await store.store("disk full on web-02", user_id=other_user_id, description="df")
    async with AsyncExitStack() as held:  # the user's slots, busy with costly searches
        for _ in range(store.search_slots.limit):
            await held.enter_async_context(store.search_slots.hold(user_id))
        queued = asyncio.create_task(store.search("disk full", user_id=user_id))
        await _until_waiting(store, user_id, 1)

        assert [i.description for i in await store.search("disk full", user_id=other_user_id)] == ["df"]
        assert not queued.done()
    assert [i.description for i in await queued] == ["df"]


async def test_a_pasted_log_line_of_hundreds_of_words_still_finds_its_output(store: MemoryStore, user_id: str) -> None:
    line = "npm ERR! ERESOLVE " + " ".join(f"peer{i}x" for i in range(600))
    key = await store.store(f"$ npm install\n{line}\n", user_id=user_id, description="npm install")
    await store.store("npm install ok", user_id=user_id, description="npm install")
    # Lexical ranking reads the first MAX_QUERY_WORDS words: each word costs scans, 600 of them took ~5 s.
    assert MAX_QUERY_WORDS < 600
    assert (await store.search(f'"{line}"', user_id=user_id))[0].memory_key == key
