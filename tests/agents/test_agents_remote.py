"""Code runs on executor workers over AutoGen's gRPC runtime (a real host, workers and client over TCP)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime, GrpcWorkerAgentRuntimeHost
from support.processes import marker_seconds, processes_with, wait_until
from support.scripted_llm import ScriptedLLM
from support.servers import free_port

from agent_memory import MemoryStore
from agent_memory.agents import (
    AgentBuilder,
    ExecutorActor,
    RemoteCodeExecutor,
    RemoteExecutorUnavailable,
    add_serializers,
    executor_type,
    shard_of,
)
from agent_memory.agents._spec import DEFAULT_TEAM_SPEC
from agent_memory.placeholders import parse_memory_refs


def free_address() -> str:
    return f"127.0.0.1:{free_port()}"


class Cluster:
    """A host, ``workers`` executor workers (shard i has its own home) and a client runtime."""

    def __init__(self, tmp_path: Path, workers: int) -> None:
        self.address = free_address()
        self.homes = [tmp_path / f"worker-{i}" for i in range(workers)]
        self.host = GrpcWorkerAgentRuntimeHost(address=self.address)
        self.workers: list[GrpcWorkerAgentRuntime] = []
        self.client = GrpcWorkerAgentRuntime(host_address=self.address)

    async def start(self) -> None:
        self.host.start()
        for i, home in enumerate(self.homes):
            worker = GrpcWorkerAgentRuntime(host_address=self.address)
            add_serializers(worker)
            await worker.start()

            def factory(home: Path = home, name: str = f"worker-{i}") -> ExecutorActor:
                return ExecutorActor(home=home, spec=DEFAULT_TEAM_SPEC.executor, worker_name=name)

            await ExecutorActor.register(worker, executor_type(i), factory)
            self.workers.append(worker)
        add_serializers(self.client)
        await self.client.start()

    async def stop(self) -> None:
        for runtime in [self.client, *self.workers]:
            with contextlib.suppress(Exception):  # a test may have stopped a worker already
                await runtime.stop()
        await self.host.stop()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    c = Cluster(tmp_path, workers=2)
    await c.start()
    yield c
    await c.stop()


def remote(cluster: Cluster, user: str, thread: str = "t1", **kwargs: Any) -> RemoteCodeExecutor:
    return RemoteCodeExecutor(cluster.client, user_id=user, thread_id=thread, shards=2, address=cluster.address,
                              **kwargs)  # fmt: skip


async def test_a_block_runs_on_the_worker_of_the_users_shard_in_its_work_directory(cluster: Cluster) -> None:
    for user in ("alice", "bob"):
        result = await remote(cluster, user).execute_code_blocks(
            [CodeBlock(language="bash", code=f"echo hello {user} > note.txt; cat note.txt")], CancellationToken()
        )
        assert result.exit_code == 0 and result.output.strip() == f"hello {user}"
        owner_home = cluster.homes[shard_of(user, 2)]
        assert [p.read_text().strip() for p in owner_home.glob("work/*/*/note.txt")] == [f"hello {user}"]


async def test_cancelling_kills_the_run_on_the_worker(cluster: Cluster) -> None:
    marker = marker_seconds()
    token = CancellationToken()
    run = remote(cluster, "carol").execute_code_blocks([CodeBlock(language="bash", code=f"sleep {marker}")], token)
    task = asyncio.ensure_future(run)
    await wait_until(lambda: bool(processes_with(f"sleep {marker}")))
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: not processes_with(f"sleep {marker}"))


async def test_without_a_worker_the_run_fails_clearly_and_nothing_runs_here(tmp_path: Path) -> None:
    lonely = Cluster(tmp_path, workers=0)
    await lonely.start()
    try:
        executor = RemoteCodeExecutor(lonely.client, user_id="dave", thread_id="t", address=lonely.address)
        with pytest.raises(RemoteExecutorUnavailable, match="agent-memory runtime worker"):
            await executor.execute_code_blocks(
                [CodeBlock(language="bash", code=f"touch {tmp_path}/ran-here")], CancellationToken()
            )
    finally:
        await lonely.stop()
    assert not (tmp_path / "ran-here").exists()


async def test_a_team_runs_its_code_remotely_and_keeps_big_outputs_as_placeholders(
    cluster: Cluster, store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    scripted_llm.add("```bash\nseq 1 4000\n```", "Counted. TERMINATE")
    builder = AgentBuilder(store, user_id, model_client=scripted_llm.model_client(), home=tmp_path / "client",
                           executor_runtime=cluster.client, executor_shards=2)  # fmt: skip
    session = await builder.build()
    try:
        result = await session.run("count to 4000")
    finally:
        await session.close()

    report = next(m.to_text() for m in result.messages if m.source == "executor")
    [ref] = parse_memory_refs(report)
    assert await store.retrieve(ref.key, user_id=user_id) == "".join(f"{n}\n" for n in range(1, 4001))
    assert not (tmp_path / "client" / "work").exists()  # nothing ran in the client process's home
