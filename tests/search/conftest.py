"""Fixtures of the search tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from support.embedding_stub import StubServer, serve_stub, stub_embedder

from agent_memory import MemoryStore
from agent_memory.config import Settings


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """The stand-in embedding endpoint (see ``support.embedding_stub``)."""
    with serve_stub() as server:
        yield server


@pytest.fixture
async def needs_pgvector(store: MemoryStore) -> None:
    """Skip tests about stored vectors on servers without pgvector (e.g. Debian's PostgreSQL 15); the lexical
    fallback on such servers is covered by the tests that do not use this fixture."""
    if not await store.db.has_extension("vector"):
        pytest.skip("this PostgreSQL server has no pgvector: vectors are not stored, search is lexical")


@pytest.fixture
async def dense_store(database_url: str, stub: StubServer) -> AsyncIterator[MemoryStore]:
    s = await MemoryStore.open(database_url, settings=Settings(database_url=database_url), embedder=stub_embedder(stub))
    yield s
    await s.close()


@pytest.fixture
async def vector_store(dense_store: MemoryStore, needs_pgvector: None) -> MemoryStore:
    """A store with the stand-in embedder on a server with pgvector (skipped elsewhere)."""
    return dense_store
