"""Fixtures of the UI tests: a fresh database per module, its store, and Debian's chromium via Playwright.

Playwright is imported here only, so the rest of the suite runs without it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, async_playwright
from support.databases import fresh_database, open_store
from ui_support import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS

from agent_memory import MemoryStore

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
