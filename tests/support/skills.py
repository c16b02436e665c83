"""Procedural memory for tests: skills run in the agents' sandboxed executor, in a directory of the test.

The skills wing never builds an executor itself (it fails closed without one); surfaces and tests hand one in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_memory import MemoryStore
from agent_memory.agents import LocalProcessGroupExecutor
from agent_memory.skills import ProceduralMemory, ProceduralMemorySettings


def procedural_memory(
    store: MemoryStore,
    user_id: str,
    agent_id: str = "coder",
    *,
    work_dir: Path,
    settings: ProceduralMemorySettings | None = None,
    **kwargs: Any,
) -> ProceduralMemory:
    """A ProceduralMemory whose skills run in ``work_dir`` with the settings' timeout."""
    settings = settings or ProceduralMemorySettings()
    executor = LocalProcessGroupExecutor(timeout=settings.execution_timeout, work_dir=work_dir)
    return ProceduralMemory(store, user_id=user_id, agent_id=agent_id, settings=settings, executor=executor, **kwargs)
