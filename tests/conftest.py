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
from playwright.async_api import Browser, async_playwright
from support.databases import fresh_database, open_store
from test_ui_support import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

from agent_memory import MemoryStore
from agent_memory.db import start_embedded_server

UI_LOG_TAIL_LINES = 40


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """A failed UI test's report ends with the tail of each UI server's log: CI shows only the report."""
    report = yield
    if call.when == "call" and report.failed and item.path.name.startswith("test_ui"):
        for log in sorted(ARTIFACTS.glob("*.log")):
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[-UI_LOG_TAIL_LINES:]
            report.sections.append((f"{log.name} (last {len(lines)} lines)", "\n".join(lines)))
    return report


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


# ------------------------------------------------------------------ the UI tests (test_ui_*.py)


@pytest.fixture(scope="module")
async def ui_database(database_url: str) -> AsyncIterator[str]:
    """The database of one module's `agent-memory ui` process: fresh, so its users and threads are its own."""
    async with fresh_database(database_url, "am_ui") as url:
        yield url


@pytest.fixture(scope="module")
async def ui_store(ui_database: str) -> AsyncIterator[MemoryStore]:
    async with await open_store(ui_database) as s:
        yield s


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    """Debian's chromium driven by Playwright (the tests using it skip where it is absent)."""
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        await b.close()
