"""Shared fixtures: one real PostgreSQL server per test session.

The embedded server (a fresh data directory under pytest's tmp dir) is used unless
AGENT_MEMORY_TEST_DATABASE_URL points at another server. Tests isolate themselves by using fresh
user identifiers, never by mocking or truncating.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from support.databases import open_store

from agent_memory import MemoryStore
from agent_memory.store import start_embedded_server

# The scripted OpenAI-compatible LLM server fixture (`scripted_llm`), see tests/support/scripted_llm.py.
pytest_plugins = ["support.scripted_llm"]


def pytest_configure(config: pytest.Config) -> None:
    """Give this run its own temporary base directory.

    pytest's default base (/tmp/pytest-of-<user>) is shared by every pytest process of the OS user and pruned at
    start-up, so a second run on the machine deleted this run's files, the embedded database among them.
    An explicit ``--basetemp`` still wins.
    """
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = tempfile.mkdtemp(prefix="agent-memory-tests-")
        config.stash[_OWN_BASETEMP] = config.option.basetemp
        # State the library writes by default (sandbox uids, secrets) stays out of the real ~/.agent-memory.
        os.environ.setdefault("AGENT_MEMORY_HOME", os.path.join(config.option.basetemp, "default-home"))


def pytest_unconfigure(config: pytest.Config) -> None:
    # Keep the files of a failed run for inspection; remove those of a passing one.
    own = config.stash.get(_OWN_BASETEMP, None)
    if own and config.stash.get(_RUN_PASSED, False):
        shutil.rmtree(own, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_RUN_PASSED] = exitstatus == 0


_OWN_BASETEMP = pytest.StashKey[str]()
_RUN_PASSED = pytest.StashKey[bool]()


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
