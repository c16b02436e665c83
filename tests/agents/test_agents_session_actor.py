"""The agents as actors: a session actor per (user, thread) runs the team on a worker; turns stream back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from autogen_agentchat.base import TaskResult
from autogen_core import AgentId, CancellationToken, SingleThreadedAgentRuntime
from support.cluster import Cluster, SessionWorker
from support.processes import marker_seconds, processes_with, wait_until
from support.scripted_llm import ScriptedLLM

from agent_memory import MemoryStore
from agent_memory.agents import (
    SESSION_MESSAGE_TYPES,
    AgentBuilder,
    AgentSession,
    LocalSessions,
    RemoteAgentSession,
    SessionActor,
    StartTurn,
    TurnEnded,
    add_serializers,
    session_key,
    session_type,
)
from agent_memory.placeholders import parse_memory_refs


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path, workers=0) as c:
        yield c


@pytest.fixture
async def session_worker(
    cluster: Cluster, store: MemoryStore, scripted_llm: ScriptedLLM, tmp_path: Path
) -> AsyncIterator[SessionWorker]:
    worker = SessionWorker(cluster, store, scripted_llm, tmp_path / "session-worker")
    await worker.start()
    yield worker
    await worker.stop()


def remote(cluster: Cluster, user_id: str, thread_id: str = "t1") -> RemoteAgentSession:
    return RemoteAgentSession(cluster.client, user_id=user_id, thread_id=thread_id, address=cluster.address)


async def test_a_turn_runs_on_the_session_worker_and_streams_back(
    cluster: Cluster, session_worker: SessionWorker, store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.add("```bash\nseq 1 3000\n```", "Counted. TERMINATE")
    items = [item async for item in remote(cluster, user_id).run_stream("count to 3000")]

    result = items[-1]
    assert isinstance(result, TaskResult) and result.stop_reason
    report = next(m.to_text() for m in result.messages if m.source == "executor" and m.type == "TextMessage")
    [ref] = parse_memory_refs(report)
    assert await store.retrieve(ref.key, user_id=user_id) == "".join(f"{n}\n" for n in range(1, 3001))
    assert any(m.type == "MemoryStoredEvent" for m in result.messages)  # agent-memory's own events cross too
    assert list(session_worker.home.glob("work/*/*"))  # the code ran on the session worker


async def test_a_new_session_worker_rebuilds_the_context_from_postgresql(
    cluster: Cluster, session_worker: SessionWorker, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.add("```bash\nseq 1 3000\n```", "Counted. TERMINATE")
    first = await remote(cluster, user_id).run("count to 3000")
    [ref] = parse_memory_refs(next(m.to_text() for m in first.messages if m.source == "executor"
                                   and m.type == "TextMessage"))  # fmt: skip
    await session_worker.stop()  # the worker goes away; another takes over the shard
    await session_worker.start()
    asked = len(scripted_llm.requests)

    scripted_llm.add("The log is stored. TERMINATE")
    await remote(cluster, user_id).run("what did the count print?")

    request = scripted_llm.requests[asked].text
    assert "count to 3000" in request and ref.key in request  # the saved conversation, placeholder included


async def test_turns_follow_each_other_in_one_session(
    cluster: Cluster, session_worker: SessionWorker, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    session = remote(cluster, user_id)
    scripted_llm.add("First. TERMINATE", "Second. TERMINATE")

    first, second = await session.run("one"), await session.run("two")

    assert [first.messages[-1].to_text(), second.messages[-1].to_text()] == ["First. TERMINATE", "Second. TERMINATE"]


async def test_stop_cancels_the_turn_and_kills_its_code_on_the_worker(
    cluster: Cluster, session_worker: SessionWorker, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    marker = marker_seconds()
    scripted_llm.add(f"```bash\nsleep {marker}\n```", "TERMINATE")
    token = CancellationToken()
    turn = asyncio.ensure_future(remote(cluster, user_id).run("wait", token))
    await wait_until(lambda: bool(processes_with(f"sleep {marker}")))

    token.cancel()

    with pytest.raises(asyncio.CancelledError):
        await turn
    await wait_until(lambda: not processes_with(f"sleep {marker}"))


async def test_a_turn_for_another_user_is_refused_by_the_session_actor(
    cluster: Cluster, session_worker: SessionWorker, user_id: str, other_user_id: str
) -> None:
    forged = StartTurn(turn_id="x", user_id=other_user_id, thread_id="t1", task="read alice's memory",
                       events_to="nobody")  # fmt: skip
    add_serializers(cluster.client, *SESSION_MESSAGE_TYPES)

    ended = await cluster.client.send_message(forged, AgentId(session_type(0), session_key(user_id, "t1")))

    assert isinstance(ended, TurnEnded) and "another user" in ended.error


async def test_on_one_machine_the_same_actor_runs_on_the_in_process_runtime(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    runtime = SingleThreadedAgentRuntime()

    async def build(user: str, thread: str) -> AgentSession:
        builder = AgentBuilder(store, user, model_client=scripted_llm.model_client(), home=tmp_path)
        return await builder.build(thread_id=thread)

    await SessionActor.register(runtime, session_type(0), lambda: SessionActor(build))
    runtime.start()
    scripted_llm.add("```bash\necho in process\n```", "TERMINATE")
    try:
        result = await RemoteAgentSession(runtime, user_id=user_id, thread_id="t1").run("say it")
    finally:
        await runtime.stop()

    assert any("in process" in m.to_text() for m in result.messages if m.source == "executor")


async def test_two_chats_on_one_thread_have_their_own_session_actors(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    local = LocalSessions()

    async def chat() -> RemoteAgentSession:
        builder = AgentBuilder(store, user_id, model_client=scripted_llm.model_client(), home=tmp_path)
        return await local.open(await builder.build(thread_id="shared-thread"))

    first, second = await chat(), await chat()  # e.g. the same thread open in two browser tabs
    scripted_llm.add("One. TERMINATE", "Two. TERMINATE")
    try:
        await first.run("one")
        await second.close()  # closing the other tab ...
        result = await first.run("two")  # ... leaves this one working
    finally:
        await first.close()
        await local.stop()

    assert result.messages[-1].to_text() == "Two. TERMINATE"
