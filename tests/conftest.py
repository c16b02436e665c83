"""Shared fixtures: one real PostgreSQL server per test session.

The embedded server (a fresh data directory under pytest's tmp dir) is used unless
AGENT_MEMORY_TEST_DATABASE_URL points at another server. Tests isolate themselves by using fresh
user identifiers, never by mocking or truncating.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from support.databases import open_store

from agent_memory import MemoryStore
from agent_memory.store import start_embedded_server

# The scripted OpenAI-compatible LLM server fixture (`scripted_llm`), see tests/support/scripted_llm.py.
pytest_plugins = ["support.scripted_llm"]


@pytest.fixture(scope="session")
def agent_memory_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("am")
    os.environ["AGENT_MEMORY_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
async def database_url(agent_memory_home: Path) -> str:
    url = os.environ.get("AGENT_MEMORY_TEST_DATABASE_URL")
    if not url:
        url = (await start_embedded_server(agent_memory_home)).uri
    # Subprocesses (CLI, MCP, UI) started by tests use the same server.
    os.environ["AGENT_MEMORY_DATABASE_URL"] = url
    return url


@pytest.fixture(scope="session")
async def store(database_url: str) -> AsyncIterator[MemoryStore]:
    async with await open_store(database_url) as s:
        yield s


@pytest.fixture
def user_id() -> str:
    """A user identifier no other test uses."""
    return f"user-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def other_user_id() -> str:
    return f"other-{uuid.uuid4().hex[:12]}"
