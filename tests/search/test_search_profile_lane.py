"""Requests reach the user's standing preferences and facts even without a shared word (the profile lane).

"ship the release to production" shares no word with "deploy windows: Tuesdays only", and a user with many
release notes has dozens of memories closer to it in any vector space. Among the user's preferences and facts,
though, it is the closest: dense search also ranks those on their own and lets the best three join the results.
"""

from __future__ import annotations

from agent_memory import MemoryStore
from agent_memory.search._hybrid import CANDIDATES_PER_RANKER

QUERY = "ship the release to production"
PREFERENCE = "Deploy windows: Tuesdays only, never on a Friday."


async def _notes_closer_than_the_preference(store: MemoryStore, user: str) -> None:
    # More than the dense ranker's candidates, each nearer to the query than the preference is.
    for n in range(CANDIDATES_PER_RANKER + 10):
        await store.store(
            f"deploy release ship production deployment {n}", user_id=user, description=f"release note {n}",
            memory_type="note",
        )  # fmt: skip


async def _flush(store: MemoryStore) -> None:
    assert store.embeddings is not None
    await store.embeddings.flush()


async def test_a_preference_without_a_shared_word_comes_back(vector_store: MemoryStore, user_id: str) -> None:
    await _notes_closer_than_the_preference(vector_store, user_id)
    pref = await vector_store.store(PREFERENCE, user_id=user_id, description="deploy windows",
                                    memory_type="user_preference")  # fmt: skip
    await _flush(vector_store)

    hits = await vector_store.search(QUERY, user_id=user_id, limit=100)

    found = {h.memory_key: h for h in hits}
    assert pref in found
    assert found[pref].why is not None and set(found[pref].why) == {"profile"}


async def test_another_users_closer_preference_never_comes_back(vector_store: MemoryStore, user_id: str) -> None:
    other = f"{user_id}-other"
    foreign = {
        await vector_store.store(f"deploy release ship production freeze {n}", user_id=other,
                                 description="deploy policy", memory_type="user_preference")
        for n in range(4)  # more than the lane's three: a lane that ignored the user would have only these
    }  # fmt: skip
    await _notes_closer_than_the_preference(vector_store, user_id)
    own = await vector_store.store(PREFERENCE, user_id=user_id, description="deploy windows",
                                   memory_type="user_preference")  # fmt: skip
    await _flush(vector_store)

    keys = [h.memory_key for h in await vector_store.search(QUERY, user_id=user_id, limit=100)]

    assert own in keys and not foreign & set(keys)


async def test_a_search_for_another_memory_type_gets_no_preference(vector_store: MemoryStore, user_id: str) -> None:
    await _notes_closer_than_the_preference(vector_store, user_id)
    await vector_store.store(PREFERENCE, user_id=user_id, description="deploy windows", memory_type="user_preference")
    await _flush(vector_store)

    hits = await vector_store.search(QUERY, user_id=user_id, limit=100, memory_type="note")

    assert hits and {h.memory_type for h in hits} == {"note"}


async def test_a_lane_hit_alone_ranks_below_an_exact_match(vector_store: MemoryStore, user_id: str) -> None:
    exact = await vector_store.store("ship the release to production with ./release.sh --prod", user_id=user_id,
                                     description="release procedure", memory_type="note")  # fmt: skip
    pref = await vector_store.store(PREFERENCE, user_id=user_id, description="deploy windows",
                                    memory_type="user_preference")  # fmt: skip
    await _flush(vector_store)

    keys = [h.memory_key for h in await vector_store.search(QUERY, user_id=user_id)]

    assert keys[0] == exact and pref in keys


async def test_a_retracted_preference_does_not_come_back(vector_store: MemoryStore, user_id: str) -> None:
    await _notes_closer_than_the_preference(vector_store, user_id)
    pref = await vector_store.store(PREFERENCE, user_id=user_id, description="deploy windows",
                                    memory_type="user_preference")  # fmt: skip
    await _flush(vector_store)
    await vector_store.retract(pref, user_id=user_id, reason="no longer true")

    keys = [h.memory_key for h in await vector_store.search(QUERY, user_id=user_id, limit=100)]

    assert pref not in keys
