"""Search ranking without an embedder (the default): full-text + trigram fused in SQL, on a real PostgreSQL.

Each test stores a handful of realistic memories for a fresh user and states one ranking behaviour.
Dense retrieval, embedders and reindex are in test_embeddings.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from support.databases import fresh_database, open_store

from agent_memory import MemoryStore
from agent_memory.config import Settings
from agent_memory.search import SearchOptions, hybrid_search, negated_words
from agent_memory.store import Database, find_user_pk

DF_FULL = (
    "$ df -h\nFilesystem      Size  Used Avail Use% Mounted on\n/dev/sda1        98G   98G     0 100% /\n"
    "disk full: cannot write /var/log/app.log\n"
)
DF_OK = "$ df -h\nFilesystem      Size  Used Avail Use% Mounted on\n/dev/sda1        98G   41G   57G  42% /\n"
NPM_FAIL = (
    "$ npm install\nnpm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n"
    'npm ERR! peer react@"^17.0.0" from react-dom@17.0.2\n'
)
GIT_LOG = (
    "$ git log -n 1\ncommit 9f3e2a1b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f\nAuthor: Ana Lima <ana@example.com>\n\n"
    "    fix race condition in job scheduler\n"
)
NGINX = (
    "2025/03/11 09:14:22 [error] 2211#2211: upstream timed out (110: Connection timed out) while reading "
    "response header from upstream, server: shop.example.com\n"
)


CMD = "command_output"


async def _seed(store: MemoryStore, user: str) -> dict[str, str]:
    keys = {
        "df_full": await store.store(DF_FULL, user_id=user, description="df -h on build-01", memory_type=CMD),
        "df_ok": await store.store(DF_OK, user_id=user, description="df -h on web-02", memory_type=CMD),
        "npm": await store.store(NPM_FAIL, user_id=user, description="npm install (exit 1)", memory_type=CMD),
        "git": await store.store(GIT_LOG, user_id=user, description="git log -n 1", memory_type=CMD),
        "nginx": await store.store(NGINX, user_id=user, description="nginx error log", memory_type=CMD),
        "note": await store.store(
            "We decided to keep Redis for the session cache (ticket OPS-4821).", user_id=user,
            description="session cache decision", memory_type="note",
        ),
    }  # fmt: skip
    return keys


async def test_words_of_an_error_find_the_command_output(store: MemoryStore, user_id: str) -> None:
    keys = await _seed(store, user_id)
    items = await store.search("ERESOLVE unable to resolve dependency tree", user_id=user_id)
    assert items[0].memory_key == keys["npm"]


async def test_natural_language_question_matches_on_its_content_words(store: MemoryStore, user_id: str) -> None:
    keys = await _seed(store, user_id)
    items = await store.search("why did the upstream time out?", user_id=user_id)
    assert items and items[0].memory_key == keys["nginx"]


async def test_typo_query_still_finds_the_memory(store: MemoryStore, user_id: str) -> None:
    keys = await _seed(store, user_id)
    items = await store.search("dsk ful", user_id=user_id)
    assert items and items[0].memory_key == keys["df_full"]


async def test_commit_hash_prefix_finds_the_git_log(store: MemoryStore, user_id: str) -> None:
    keys = await _seed(store, user_id)
    items = await store.search("9f3e2a1b", user_id=user_id)
    assert [i.memory_key for i in items][:1] == [keys["git"]]


async def test_ticket_id_finds_the_note(store: MemoryStore, user_id: str) -> None:
    keys = await _seed(store, user_id)
    items = await store.search("OPS-4821", user_id=user_id)
    assert items[0].memory_key == keys["note"]


async def test_memory_key_finds_that_memory(store: MemoryStore, user_id: str) -> None:
    keys = await _seed(store, user_id)
    items = await store.search(keys["nginx"], user_id=user_id)
    assert items[0].memory_key == keys["nginx"]


async def test_memory_type_filter_returns_only_that_type(store: MemoryStore, user_id: str) -> None:
    await _seed(store, user_id)
    items = await store.search("session cache Redis df", user_id=user_id, memory_type="note")
    assert items and {i.memory_type for i in items} == {"note"}


async def test_unrelated_query_returns_nothing(store: MemoryStore, user_id: str) -> None:
    await _seed(store, user_id)
    assert await store.search("best sourdough bread recipe", user_id=user_id) == []


async def test_scores_lie_in_zero_one_best_first(store: MemoryStore, user_id: str) -> None:
    await _seed(store, user_id)
    items = await store.search("df -h disk", user_id=user_id, limit=10, min_score=0.0)
    scores = [i.score for i in items]
    assert len(scores) >= 2
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


async def test_min_score_drops_weaker_hits(store: MemoryStore, user_id: str) -> None:
    await _seed(store, user_id)
    everything = await store.search("df -h disk", user_id=user_id, limit=10, min_score=0.0)
    cut = (everything[0].score + everything[-1].score) / 2  # type: ignore[operator]
    kept = await store.search("df -h disk", user_id=user_id, limit=10, min_score=cut)
    assert 0 < len(kept) < len(everything)
    assert all(i.score is not None and i.score >= cut for i in kept)


async def test_updated_preference_returns_only_the_value_that_holds_now(store: MemoryStore, user_id: str) -> None:
    old = await store.store("Indent code with tabs.", user_id=user_id, description="indentation preference",
                            memory_type="user_preference")  # fmt: skip
    new = await store.store("Indent code with 4 spaces, not tabs.", user_id=user_id,
                            description="indentation preference", memory_type="user_preference")  # fmt: skip
    items = await store.search("tabs indentation", user_id=user_id, min_score=0.0)
    assert [i.memory_key for i in items] == [new]  # the older one's validity ended when the new one was stored
    assert (await store.get(old, user_id=user_id)).valid_until is not None


async def test_explicit_supersedes_demotes_the_named_memory(store: MemoryStore, user_id: str) -> None:
    old = await store.store("Deploy window: Tuesdays 10:00 UTC.", user_id=user_id, description="deploy window",
                            memory_type="note")  # fmt: skip
    new = await store.store("Deploy window moved to Thursdays.", user_id=user_id, description="deploy schedule",
                            memory_type="note", metadata={"supersedes": old})  # fmt: skip
    items = await store.search("deploy window Tuesdays", user_id=user_id, min_score=0.0)
    assert [i.memory_key for i in items][:2] == [new, old]


async def test_unrelated_preferences_are_not_treated_as_updates(store: MemoryStore, user_id: str) -> None:
    shell = await store.store("My shell is zsh.", user_id=user_id, description="shell preference",
                              memory_type="user_preference")  # fmt: skip
    await store.store("I use vim.", user_id=user_id, description="editor preference", memory_type="user_preference")
    items = await store.search("zsh shell", user_id=user_id)
    assert items[0].memory_key == shell
    assert items[0].score is not None and items[0].score > 0.5


async def test_other_users_identical_memory_is_never_returned(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    mine = await store.store(DF_FULL, user_id=user_id, description="df -h on build-01")
    theirs = await store.store(DF_FULL, user_id=other_user_id, description="df -h on build-01")
    items = await store.search("disk full df", user_id=user_id, limit=20, min_score=0.0)
    assert [i.memory_key for i in items] == [mine]
    assert theirs not in {i.memory_key for i in items}


async def test_query_matching_only_another_users_memory_returns_nothing(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    await store.store("kafka consumer group billing lag 9000", user_id=other_user_id, description="kafka lag")
    await _seed(store, user_id)
    assert await store.search("kafka consumer group lag", user_id=user_id, min_score=0.0) == []


async def test_unknown_user_gets_nothing(store: MemoryStore, user_id: str) -> None:
    await _seed(store, user_id)
    assert await store.search("df -h", user_id=f"nobody-{uuid.uuid4().hex[:8]}", min_score=0.0) == []


async def test_websearch_exclusion_removes_rows_with_that_word(store: MemoryStore, user_id: str) -> None:
    keys = await _seed(store, user_id)
    items = await store.search("df -h -build", user_id=user_id, min_score=0.0)
    got = {i.memory_key for i in items}
    assert keys["df_ok"] in got
    assert keys["df_full"] not in got  # its description names build-01


async def test_a_pasted_separator_line_of_dashes_does_not_break_the_search(store: MemoryStore, user_id: str) -> None:
    keys = await _seed(store, user_id)
    # PostgreSQL's websearch parser fails on a few dozen dashes that negate no word ("tsquery stack too small").
    items = await store.search("npm ERR! " + "-" * 80 + " ERESOLVE - -- ---", user_id=user_id)
    assert items[0].memory_key == keys["npm"]


def test_negated_words_ignores_hyphens_and_quotes() -> None:
    assert negated_words('nginx -timeout "keep-alive -x" well-known') == ["timeout"]


async def test_mmr_promotes_a_different_memory_over_near_duplicates(store: MemoryStore, user_id: str) -> None:
    for host in ("build-01", "build-02", "build-03"):
        await store.store(DF_FULL, user_id=user_id, description=f"df -h on {host} disk full")
    other = await store.store("disk quota report: team storage 80% of quota", user_id=user_id,
                              description="disk quota report")  # fmt: skip
    plain = await store.search("disk full", user_id=user_id, limit=2, min_score=0.0)
    diverse = await store.search("disk full", user_id=user_id, limit=2, min_score=0.0, mmr=0.3)
    assert other not in {i.memory_key for i in plain}
    assert other in {i.memory_key for i in diverse}


async def test_lexical_only_ranking_needs_no_embeddings_table(store: MemoryStore, user_id: str) -> None:
    keys = await _seed(store, user_id)
    owner = await find_user_pk(store.db.pool, user_id)  # search takes the user's row id, resolved by the store
    assert owner is not None
    rows = await hybrid_search(
        store.db.pool, "npm ERESOLVE", user_pk=owner, limit=3, options=SearchOptions(rankers=("fts",), min_score=0.0)
    )
    assert rows[0]["memory_key"] == keys["npm"]
    assert set(rows[0]["why"]) == {"fts"}


async def test_hybrid_search_takes_the_users_row_id_by_keyword_only(store: MemoryStore, user_id: str) -> None:
    # The row id and the login name are both strings; a login name in its place would match nothing, silently.
    with pytest.raises(TypeError):
        await hybrid_search(store.db.pool, user_id, "npm ERESOLVE", limit=3)  # type: ignore[misc]


# ------------------------------------------------------------------ a database without pgvector


@pytest.fixture
async def novector_url(database_url: str) -> AsyncIterator[str]:
    """A fresh database on the test server whose sessions opt out of pgvector (as a server lacking it)."""
    async with fresh_database(database_url, "am_novec") as url:
        yield url + ("&" if "?" in url else "?") + "agent_memory.pgvector=off"


async def test_without_pgvector_status_says_so_and_search_stays_lexical(novector_url: str, user_id: str) -> None:
    async with await open_store(novector_url) as store:
        status = await store.db.status()
        assert status["pgvector"] is False
        assert await store.db.pool.fetchval("SELECT to_regclass('agent_memory_embeddings')") is None
        keys = await _seed(store, user_id)
        items = await store.search("dsk ful", user_id=user_id)
        assert items[0].memory_key == keys["df_full"]
        assert await store.search("best sourdough bread recipe", user_id=user_id) == []


async def test_schema_reapplies_cleanly_without_pgvector(novector_url: str) -> None:
    first = await Database.connect(novector_url, settings=Settings(database_url=novector_url))
    await first.close()
    again = await Database.connect(novector_url, settings=Settings(database_url=novector_url))
    try:
        assert await again.schema_version() >= 4
        assert not await again.has_extension("vector")
    finally:
        await again.close()


async def test_a_rare_query_word_counts_more_than_a_common_one(store: MemoryStore) -> None:
    user = f"idf-{uuid.uuid4().hex[:8]}"
    rare = await store.store("kubelet restarted after the node drain", user_id=user, memory_type=CMD)
    for n in range(30):  # stored later: newer, and each matches one query word as the rare one does
        await store.store(f"deploy {n} finished without errors", user_id=user, memory_type=CMD)

    hits = await store.search("deploy kubelet", user_id=user)

    assert hits[0].memory_key == rare
