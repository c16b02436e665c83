"""A real AutoGen gRPC runtime on localhost: a host, executor workers (each with its own home), a client, and a
session worker hosting the agents of users' threads."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime

from agent_memory import MemoryStore
from agent_memory.agents import (
    SESSION_MESSAGE_TYPES,
    AgentBuilder,
    AgentSession,
    ExecutorActor,
    RuntimeTLS,
    SessionActor,
    add_serializers,
    executor_type,
    grpc_runtime,
    runtime_host,
    session_type,
)
from agent_memory.agents._spec import DEFAULT_TEAM_SPEC
from support.servers import free_port


def free_address() -> str:
    return f"127.0.0.1:{free_port()}"


class Cluster:
    """A host, ``workers`` executor workers (shard i has its own home) and a client runtime."""

    def __init__(self, tmp_path: Path, workers: int, tls: RuntimeTLS | None = None) -> None:
        self.address = free_address()
        self.homes = [tmp_path / f"worker-{i}" for i in range(workers)]
        self.tls = tls
        self.host = runtime_host(self.address, tls)
        self.workers: list[GrpcWorkerAgentRuntime] = []
        self.client = grpc_runtime(self.address, tls)

    async def start(self) -> None:
        self.host.start()
        for i, home in enumerate(self.homes):
            worker = grpc_runtime(self.address, self.tls)
            add_serializers(worker)
            await worker.start()

            def factory(home: Path = home, name: str = f"worker-{i}") -> ExecutorActor:
                return ExecutorActor(home=home, spec=DEFAULT_TEAM_SPEC.executor, worker_name=name)

            await ExecutorActor.register(worker, executor_type(i), factory)
            self.workers.append(worker)
        add_serializers(self.client)
        await self.client.start()

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        for runtime in [self.client, *self.workers]:
            with contextlib.suppress(Exception):  # a test may have stopped a worker already
                await runtime.stop()
        await self.host.stop()


class SessionWorker:
    """A gRPC worker process stand-in hosting session actors (code runs in its own sandboxed home)."""

    def __init__(self, cluster: Cluster, store: MemoryStore, llm: Any, home: Path) -> None:
        self.cluster, self.store, self.llm, self.home = cluster, store, llm, home
        self.runtime: Any = None

    async def build(self, user_id: str, thread_id: str) -> AgentSession:
        builder = AgentBuilder(self.store, user_id, model_client=self.llm.model_client(), home=self.home)
        return await builder.build(thread_id=thread_id)

    async def start(self) -> None:
        self.runtime = grpc_runtime(self.cluster.address)
        add_serializers(self.runtime, *SESSION_MESSAGE_TYPES)
        await self.runtime.start()
        await SessionActor.register(self.runtime, session_type(0), lambda: SessionActor(self.build))

    async def stop(self) -> None:
        await self.runtime.stop()
