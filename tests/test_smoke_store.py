from agent_memory import MemoryNotFound, MemoryStore
import pytest


async def test_store_then_retrieve_round_trips(store: MemoryStore, user_id: str) -> None:
    key = await store.store("hello", user_id=user_id)
    assert await store.retrieve(key, user_id=user_id) == "hello"


async def test_other_user_gets_not_found(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    key = await store.store("secret", user_id=user_id)
    with pytest.raises(MemoryNotFound):
        await store.retrieve(key, user_id=other_user_id)
