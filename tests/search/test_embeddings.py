"""Embedders, the background vector writer, dense/hybrid search and ``agent-memory reindex``, on a real PostgreSQL.

The OpenAI-compatible embedder is driven with the real ``openai`` client against a tiny local HTTP server that
returns deterministic vectors (a stand-in for a remote model: words of one concept group share a dimension, so
"storage exhausted" lands near "disk full"). Tests of the local MiniLM model skip when the optional
``local-embeddings`` extra (torch, sentence-transformers) is not installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.embedding_stub import StubServer, stub_embedder

from agent_memory import MemoryStore
from agent_memory.config import Settings
from agent_memory.search import (
    Embedder,
    EmbeddingError,
    NoEmbedder,
    OpenAIEmbedder,
    SearchOptions,
    SentenceTransformerEmbedder,
    embedder_from_settings,
    hybrid_search,
)
from agent_memory.search._embedders import cpu_has_bf16
from agent_memory.store import find_user_pk

DF_FULL = "$ df -h\n/dev/sda1  98G  98G  0 100% /\nwrite failed: No space left on device\n"
NPM_FAIL = "$ npm install\nnpm ERR! code ERESOLVE\nnpm ERR! unable to resolve dependency tree\n"
NOTE = "We keep Redis for the session cache."


CMD = "command_output"


async def _seed(store: MemoryStore, user: str) -> dict[str, str]:
    keys = {
        "df": await store.store(DF_FULL, user_id=user, description="df -h on build-01", memory_type=CMD),
        "npm": await store.store(NPM_FAIL, user_id=user, description="npm install (exit 1)", memory_type=CMD),
        "note": await store.store(NOTE, user_id=user, description="cache decision", memory_type="note"),
    }  # fmt: skip
    assert store.embeddings is not None
    await store.embeddings.flush()
    return keys


async def _vector_count(store: MemoryStore, user: str, model: str | None = None) -> int:
    return int(
        await store.db.pool.fetchval(
            """SELECT count(*) FROM agent_memory_embeddings e JOIN "User" u ON u.id = e.user_id
               WHERE u.identifier = $1 AND ($2::text IS NULL OR e.model = $2)""",
            user,
            model,
        )
    )


# ------------------------------------------------------------------ embedders


async def test_openai_embedder_returns_unit_vectors_of_the_servers_dimension(stub: StubServer) -> None:
    emb = stub_embedder(stub)
    vectors = await emb.embed(["disk full", "session cache"])
    assert len(vectors) == 2 and all(len(v) == 64 for v in vectors)
    assert all(abs(sum(x * x for x in v) - 1.0) < 1e-5 for v in vectors)
    assert emb.model_id == "stub-embed@64"
    await emb.close()


async def test_openai_embedder_asks_for_the_configured_dimension(stub: StubServer) -> None:
    emb = stub_embedder(stub, dimensions=32)
    assert len(await emb.embed_query("disk full")) == 32
    assert stub.requests[-1]["dimensions"] == 32
    assert emb.model_id == "stub-embed@32"
    await emb.close()


async def test_openai_embedder_splits_large_inputs_into_batches(stub: StubServer) -> None:
    emb = stub_embedder(stub, max_batch=3)
    vectors = await emb.embed([f"text {i}" for i in range(7)])
    assert len(vectors) == 7
    assert [len(r["input"]) for r in stub.requests] == [3, 3, 1]
    await emb.close()


async def test_endpoint_failure_raises_embedding_error(stub: StubServer) -> None:
    stub.fail = True
    emb = stub_embedder(stub)
    with pytest.raises(EmbeddingError, match="stub-embed"):
        await emb.embed(["x"])
    await emb.close()


def test_embedders_round_trip_through_component_config(stub: StubServer) -> None:
    for emb in (NoEmbedder(), stub_embedder(stub, dimensions=16), SentenceTransformerEmbedder(batch_size=8)):
        loaded = Embedder.load_component(emb.dump_component())
        assert type(loaded) is type(emb)
        assert loaded.dump_component() == emb.dump_component()


def test_settings_select_the_embedder(stub: StubServer) -> None:
    assert not embedder_from_settings(Settings()).enabled
    emb = embedder_from_settings(Settings(embedder="openai", embedding_model="m", embedding_url=stub.url))
    assert isinstance(emb, OpenAIEmbedder) and emb.model_name == "m"
    assert isinstance(embedder_from_settings(Settings(embedder="local")), SentenceTransformerEmbedder)


# ------------------------------------------------------------------ background writer


@pytest.mark.usefixtures("needs_pgvector")
async def test_store_returns_before_the_vector_is_written(database_url: str, stub: StubServer, user_id: str) -> None:
    store = await MemoryStore.open(
        database_url, settings=Settings(database_url=database_url), embedder=stub_embedder(stub, dimensions=64)
    )
    try:
        assert store.embeddings is not None
        await store.embeddings.ensure_ready()
        stub.gate.clear()  # the "model" now hangs until released
        key = await store.store(DF_FULL, user_id=user_id, description="df -h")
        assert await _vector_count(store, user_id) == 0  # store() did not wait for the model
        stub.gate.set()
        await store.embeddings.flush()
        assert await _vector_count(store, user_id, "stub-embed@64") == 1
        assert (await store.get(key, user_id=user_id)).memory_key == key
    finally:
        stub.gate.set()
        await store.close()


@pytest.mark.usefixtures("needs_pgvector")
async def test_each_stored_memory_gets_one_vector(dense_store: MemoryStore, user_id: str) -> None:
    await _seed(dense_store, user_id)
    assert await _vector_count(dense_store, user_id, "stub-embed@64") == 3


@pytest.mark.usefixtures("needs_pgvector")
async def test_writer_survives_a_failing_endpoint(dense_store: MemoryStore, stub: StubServer, user_id: str) -> None:
    await _seed(dense_store, user_id)
    stub.fail = True
    await dense_store.store("later memory", user_id=user_id, description="written while the model is down")
    assert dense_store.embeddings is not None
    await dense_store.embeddings.flush()
    stub.fail = False
    await dense_store.store("after recovery", user_id=user_id, description="written after")
    await dense_store.embeddings.flush()
    assert await _vector_count(dense_store, user_id) == 4  # the failed one waits for reindex
    assert await dense_store.count_unembedded(user_id=user_id) == 1


# ------------------------------------------------------------------ dense and hybrid search


@pytest.mark.usefixtures("needs_pgvector")
async def test_paraphrase_found_by_dense_ranking_but_not_lexically(dense_store: MemoryStore, user_id: str) -> None:
    keys = await _seed(dense_store, user_id)
    query = "storage exhausted"  # shares no word with the df output
    owner = await find_user_pk(dense_store.db.pool, user_id)  # search takes the user's row id
    assert owner is not None
    lexical = await hybrid_search(dense_store.db.pool, query, user_pk=owner, limit=5,
                                  options=SearchOptions(rankers=("fts", "trigram")))  # fmt: skip
    assert lexical == []
    items = await dense_store.search(query, user_id=user_id)
    assert items and items[0].memory_key == keys["df"]


async def test_hybrid_keeps_exact_identifier_matches_first(dense_store: MemoryStore, user_id: str) -> None:
    keys = await _seed(dense_store, user_id)
    items = await dense_store.search("ERESOLVE", user_id=user_id)
    assert items[0].memory_key == keys["npm"]


async def test_dense_search_never_returns_another_users_identical_memory(
    dense_store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    await _seed(dense_store, other_user_id)
    keys = await _seed(dense_store, user_id)
    items = await dense_store.search("storage exhausted", user_id=user_id, limit=20, min_score=0.0)
    assert {i.memory_key for i in items} <= set(keys.values())


async def test_search_falls_back_to_lexical_when_the_endpoint_is_down(
    dense_store: MemoryStore, stub: StubServer, user_id: str
) -> None:
    keys = await _seed(dense_store, user_id)
    stub.fail = True
    items = await dense_store.search("ERESOLVE dependency tree", user_id=user_id)
    assert items[0].memory_key == keys["npm"]


@pytest.mark.usefixtures("needs_pgvector")
async def test_changing_the_dimension_reembeds_instead_of_failing(
    database_url: str, stub: StubServer, dense_store: MemoryStore, user_id: str
) -> None:
    keys = await _seed(dense_store, user_id)  # vectors of stub-embed@64
    settings = Settings(database_url=database_url)
    store32 = await MemoryStore.open(database_url, settings=settings, embedder=stub_embedder(stub, dimensions=32))
    try:
        assert store32.embeddings is not None
        # No 32-d vectors yet: search still answers (lexically) instead of comparing 64-d with 32-d vectors.
        assert (await store32.search("ERESOLVE", user_id=user_id))[0].memory_key == keys["npm"]
        report = await store32.reindex(user_id=user_id, prune=True)
        assert (report.embedded, report.pruned) == (3, 3)
        assert await _vector_count(store32, user_id, "stub-embed@32") == 3
        assert await _vector_count(store32, user_id, "stub-embed@64") == 0
        assert (await store32.search("storage exhausted", user_id=user_id))[0].memory_key == keys["df"]
    finally:
        await store32.close()


# ------------------------------------------------------------------ reindex


@pytest.mark.usefixtures("needs_pgvector")
async def test_reindex_backfills_memories_stored_without_an_embedder(
    store: MemoryStore, database_url: str, stub: StubServer, user_id: str
) -> None:
    for i in range(5):
        await store.store(f"output {i}: disk full", user_id=user_id, description=f"df {i}")
    s = await MemoryStore.open(database_url, settings=Settings(database_url=database_url), embedder=stub_embedder(stub))
    try:
        assert s.embeddings is not None
        assert await s.count_unembedded(user_id=user_id) == 5
        seen: list[tuple[int, int]] = []
        report = await s.reindex(user_id=user_id, batch_size=2, progress=lambda d, t: seen.append((d, t)))
        assert report.embedded == 5 and report.failed == 0
        assert seen[0] == (0, 5) and seen[-1] == (5, 5)
        assert await s.count_unembedded(user_id=user_id) == 0
        assert (await s.reindex(user_id=user_id)).embedded == 0  # nothing left to do
    finally:
        await s.close()


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_memory.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.usefixtures("needs_pgvector")
async def test_reindex_command_embeds_and_reports(store: MemoryStore, stub: StubServer, user_id: str) -> None:
    for i in range(3):
        await store.store(f"build log {i}", user_id=user_id, description=f"build {i}")
    env = {**os.environ, "AGENT_MEMORY_EMBEDDER": "openai", "AGENT_MEMORY_EMBEDDING_URL": stub.url,
           "AGENT_MEMORY_EMBEDDING_MODEL": "stub-embed", "OPENAI_API_KEY": "test"}  # fmt: skip
    proc = await asyncio.to_thread(_cli, "reindex", "--user", user_id, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "3/3" in proc.stderr  # the progress bar
    assert "embedded 3 memories with stub-embed@64" in proc.stdout
    proc = await asyncio.to_thread(_cli, "reindex", "--user", user_id, "--json", env=env)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["embedded"] == 0


@pytest.mark.usefixtures("needs_pgvector")
async def test_reindex_command_with_a_failing_embedder_fails_once_up_front(
    store: MemoryStore, stub: StubServer, user_id: str
) -> None:
    await store.store("build log", user_id=user_id, description="build")
    stub.fail = True
    # A configured dimension: nothing asks the model before the batches (as with the local model).
    env = {**os.environ, "AGENT_MEMORY_EMBEDDER": "openai", "AGENT_MEMORY_EMBEDDING_URL": stub.url,
           "AGENT_MEMORY_EMBEDDING_MODEL": "stub-embed", "AGENT_MEMORY_EMBEDDING_DIMENSIONS": "64",
           "OPENAI_API_KEY": "test"}  # fmt: skip
    proc = await asyncio.to_thread(_cli, "reindex", "--user", user_id, env=env)
    assert proc.returncode == 2
    assert "embedding failed" in proc.stderr
    assert "model crashed" in proc.stderr  # the endpoint's own words
    assert "1/1" not in proc.stderr  # no progress bar over batches that could only fail
    assert "run reindex again" not in proc.stdout + proc.stderr


async def test_reindex_command_without_an_embedder_is_a_usage_error(user_id: str, database_url: str) -> None:
    env = {**os.environ, "AGENT_MEMORY_EMBEDDER": "none"}
    proc = await asyncio.to_thread(_cli, "reindex", "--user", user_id, env=env)
    assert proc.returncode == 2
    assert "no embedder is configured" in proc.stderr


# ------------------------------------------------------------------ local model (optional extra)

needs_local_model = pytest.mark.skipif(
    not SentenceTransformerEmbedder.available(),
    reason="local-embeddings extra (torch, sentence-transformers) not installed",
)


@needs_local_model
async def test_local_minilm_embeds_offline_into_384_dimensions() -> None:
    emb = SentenceTransformerEmbedder()
    vectors = await emb.embed(["disk full", "no space left on device", "banana bread"])
    assert emb.model_id == "all-MiniLM-L6-v2@384"
    near = sum(a * b for a, b in zip(vectors[0], vectors[1], strict=True))
    far = sum(a * b for a, b in zip(vectors[0], vectors[2], strict=True))
    assert near > far
    await emb.close()


@needs_local_model
@pytest.mark.usefixtures("needs_pgvector")
async def test_local_minilm_finds_a_paraphrase(database_url: str, user_id: str) -> None:
    store = await MemoryStore.open(
        database_url, settings=Settings(database_url=database_url), embedder=SentenceTransformerEmbedder()
    )
    try:
        keys = await _seed(store, user_id)
        items = await store.search("which machine ran out of room for files", user_id=user_id)
        assert items and items[0].memory_key == keys["df"]
        assert await store.search("best sourdough bread recipe", user_id=user_id) == []
    finally:
        await store.close()


def test_bfloat16_is_used_only_on_cpus_that_compute_it_natively(tmp_path: Path) -> None:
    with_bf16, without = tmp_path / "bf16", tmp_path / "plain"
    with_bf16.write_text("flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n")
    without.write_text("flags\t\t: fpu sse2 avx2 avx512f avx512_vnni\n")

    assert cpu_has_bf16(str(with_bf16)) and not cpu_has_bf16(str(without))
    assert not cpu_has_bf16(str(tmp_path / "missing"))
    assert SentenceTransformerEmbedder(precision="float32").bfloat16 is False
    assert SentenceTransformerEmbedder(precision="bfloat16").bfloat16 is True


@pytest.mark.skipif(not SentenceTransformerEmbedder.available(), reason="needs the local-embeddings extra")
async def test_the_faster_default_gives_the_same_vectors_as_full_precision() -> None:
    texts = ["disk full on /dev/sda1 while writing the backup", "pytest: 3 failed, assertion error in test_parser"]
    fast, full = SentenceTransformerEmbedder(), SentenceTransformerEmbedder(precision="float32", max_tokens=None)
    try:
        for a, b in zip(await fast.embed(texts), await full.embed(texts), strict=True):
            assert sum(x * y for x, y in zip(a, b, strict=True)) > 0.99  # short texts: only precision differs
    finally:
        await fast.close()
        await full.close()


@pytest.mark.usefixtures("needs_pgvector")
async def test_db_status_counts_the_memories_that_lack_a_vector(
    store: MemoryStore, stub: StubServer, user_id: str
) -> None:
    for i in range(3):
        await store.store(f"deploy log {i}", user_id=user_id, description=f"deploy {i}")
    env = {**os.environ, "AGENT_MEMORY_EMBEDDER": "openai", "AGENT_MEMORY_EMBEDDING_URL": stub.url,
           "AGENT_MEMORY_EMBEDDING_MODEL": "stub-embed", "OPENAI_API_KEY": "test"}  # fmt: skip
    before = json.loads((await asyncio.to_thread(_cli, "db", "status", "--json", env=env)).stdout)["vectors"]
    assert before["embedder"] == "stub-embed@64" and before["missing"] >= 3
    assert (await asyncio.to_thread(_cli, "reindex", "--user", user_id, env=env)).returncode == 0
    after = await asyncio.to_thread(_cli, "db", "status", env=env)
    missing = before["missing"] - 3
    expected = (
        "every memory has one (stub-embed@64)" if missing == 0 else f"{missing} memories lack one of stub-embed@64"
    )
    assert f"vectors:        {expected}" in after.stdout


async def test_db_status_without_an_embedder_says_search_is_lexical(database_url: str) -> None:
    proc = await asyncio.to_thread(_cli, "db", "status", "--json", env={**os.environ, "AGENT_MEMORY_EMBEDDER": "none"})
    assert json.loads(proc.stdout)["vectors"] == {"embedder": None, "missing": None, "error": None}
