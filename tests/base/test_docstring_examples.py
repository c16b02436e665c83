"""The database examples in the library's module docstrings run for real, each in a fresh database.

The doctest run (``--doctest-modules``) skips them: they need a server. Here their ``+SKIP`` is lifted and
they run against the test server, so the README-like examples users copy keep working.
"""

from __future__ import annotations

import asyncio
import doctest
import importlib
import io

import pytest
from support.databases import fresh_database

# Modules whose docstring example is a self-contained `asyncio.run(main())` against the database.
MODULES = [
    "agent_memory.store._db",
    "agent_memory.store._store",
    "agent_memory.store._skills",
    "agent_memory.search._hybrid",
    "agent_memory.tools._toolbox",
    "agent_memory.auth._accounts",
    "agent_memory.auth._tokens",
]


def run_module_example(module_name: str) -> tuple[doctest.TestResults, str]:
    module = importlib.import_module(module_name)
    [test] = [t for t in doctest.DocTestFinder().find(module, module_name) if t.name == module_name]
    assert test.examples, f"{module_name} has no docstring example"
    for example in test.examples:
        example.options.pop(doctest.SKIP, None)
    report = io.StringIO()
    results = doctest.DocTestRunner().run(test, out=report.write)
    return results, report.getvalue()


@pytest.mark.parametrize("module_name", MODULES)
async def test_the_module_example_runs_against_postgresql(
    module_name: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fresh_database(database_url) as url:
        monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", url)
        # In a thread: the example runs its own event loop with asyncio.run().
        results, report = await asyncio.to_thread(run_module_example, module_name)
    assert results.failed == 0, report
    assert results.attempted > 0
