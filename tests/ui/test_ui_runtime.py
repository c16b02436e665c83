"""The chat UI sends users' code to the executor workers of ``AGENT_MEMORY_RUNTIME`` (never runs it itself)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from support.cluster import Cluster, SessionWorker, free_address
from support.scripted_llm import ScriptedLLM

from agent_memory import MemoryStore
from agent_memory.agents import RemoteExecutorUnavailable, shard_of
from chainlit_app import runtime
from chainlit_app.ui_agent_builder import UIAgentBuilder


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path, workers=2) as c:
        yield c


@pytest.fixture
async def ui_runtime(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """The UI process's connection is process-wide: each test starts without one and closes its own."""
    monkeypatch.setattr(runtime, "_executor_runtime", None)
    monkeypatch.setattr(runtime, "_executor_lock", None)
    yield
    if runtime._executor_runtime is not None:
        await runtime._executor_runtime.stop()  # type: ignore[attr-defined]


async def test_a_chat_sessions_code_runs_on_the_worker_of_the_users_shard(
    cluster: Cluster, ui_runtime: None, monkeypatch: pytest.MonkeyPatch, store: MemoryStore, user_id: str,
    scripted_llm: ScriptedLLM, tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("AGENT_MEMORY_RUNTIME", cluster.address)
    monkeypatch.setenv("AGENT_MEMORY_EXECUTOR_SHARDS", "2")
    scripted_llm.add("```bash\necho ran-on-a-worker > where.txt\n```", "Done. TERMINATE")
    model = scripted_llm.model_client()
    builder = await UIAgentBuilder.for_session(store, user_id=user_id, thread_id="ui-thread", model_client=model,
                                               home=tmp_path / "ui")  # fmt: skip
    session = await builder.build_session()
    try:
        await session.run("write where you ran")
    finally:
        await session.close()

    worker_home = cluster.homes[shard_of(user_id, 2)]
    assert [p.read_text() for p in worker_home.glob("work/*/*/where.txt")] == ["ran-on-a-worker\n"]
    assert not list((tmp_path / "ui").glob("work/**/where.txt"))  # the UI process ran nothing


async def test_an_unreachable_runtime_host_refuses_the_session_instead_of_running_code_locally(
    ui_runtime: None, monkeypatch: pytest.MonkeyPatch, store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_RUNTIME", free_address())  # nothing listens there

    with pytest.raises(RemoteExecutorUnavailable, match="agent-memory runtime host"):
        await UIAgentBuilder.for_session(
            store, user_id=user_id, thread_id="t", model_client=scripted_llm.model_client()
        )


async def test_with_remote_agents_a_chat_sessions_team_runs_on_a_session_worker(
    cluster: Cluster, ui_runtime: None, monkeypatch: pytest.MonkeyPatch, store: MemoryStore, user_id: str,
    scripted_llm: ScriptedLLM, tmp_path: Path,
) -> None:  # fmt: skip
    worker = SessionWorker(cluster, store, scripted_llm, tmp_path / "session-worker")
    await worker.start()
    monkeypatch.setenv("AGENT_MEMORY_RUNTIME", cluster.address)
    monkeypatch.setenv("AGENT_MEMORY_REMOTE_AGENTS", "1")
    scripted_llm.add("```bash\necho agents-on-a-worker > where.txt\n```", "Done. TERMINATE")
    try:
        agents = await runtime.remote_agents(user_id, "ui-thread")
        assert agents is not None
        await agents.run("write where the agents ran")
    finally:
        await worker.stop()

    assert [p.read_text() for p in worker.home.glob("work/*/*/where.txt")] == ["agents-on-a-worker\n"]


async def test_remote_agents_without_a_runtime_host_is_a_clear_error(
    ui_runtime: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_MEMORY_RUNTIME", raising=False)
    monkeypatch.setenv("AGENT_MEMORY_REMOTE_AGENTS", "1")

    with pytest.raises(RuntimeError, match="AGENT_MEMORY_RUNTIME"):
        await runtime.remote_agents("alice", "t")
