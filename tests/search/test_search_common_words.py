"""Candidate rows are chosen by how common each query word is among the user's own memories."""

from __future__ import annotations

import hashlib

from agent_memory import MemoryStore
from agent_memory.search._hybrid import DF_CAP


async def bulk(store: MemoryStore, user_id: str, texts: list[str], tag: str) -> None:
    """Many memories at once (through SQL: thousands of store() calls would take the test's time)."""
    await store.store("seed", user_id=user_id)  # creates the user
    await store.db.pool.execute(
        """
        INSERT INTO agent_memories (user_id, memory_key, description, content, content_sha256)
        SELECT (SELECT id FROM "User" WHERE identifier = $1), $2 || n, c, c, $3
        FROM unnest($4::text[]) WITH ORDINALITY AS x(c, n)
        """,
        user_id, tag, hashlib.sha256(b"x").hexdigest(), texts,
    )  # fmt: skip


async def test_common_words_that_never_occur_together_still_find_rows(store: MemoryStore, user_id: str) -> None:
    # Both words are in more than DF_CAP of the user's memories, never in the same one; "refused" in none.
    await bulk(store, user_id, [f"connection pool stats {n}" for n in range(DF_CAP + 50)], "conn_")
    await bulk(store, user_id, [f"postgres vacuum report {n}" for n in range(DF_CAP + 50)], "pg_")

    items = await store.search("connection refused postgres", user_id=user_id, limit=5, min_score=0.0)

    assert items and all("fts" in (i.why or {}) for i in items), "full-text found none of the user's rows"
    assert all("connection" in i.description or "postgres" in i.description for i in items)


async def test_a_word_only_other_users_have_does_not_decide_the_candidates(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    await bulk(store, other_user_id, [f"zephyrine cluster deploy {n}" for n in range(DF_CAP + 50)], "z_")
    wanted = await store.store("cluster deploy of the ledger", user_id=user_id, description="ledger deploy")

    items = await store.search("zephyrine cluster deploy", user_id=user_id)

    assert [i.memory_key for i in items] == [wanted]
