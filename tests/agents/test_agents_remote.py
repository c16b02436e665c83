"""Code runs on executor workers over AutoGen's gRPC runtime (a real host, workers and client over TCP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.messages import TextMessage
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock
from support.cluster import Cluster
from support.processes import marker_seconds, processes_with, wait_until
from support.scripted_llm import ScriptedLLM

from agent_memory import MemoryStore
from agent_memory.agents import (
    AgentBuilder,
    CodeProgressEvent,
    ExecutorAgent,
    RemoteCodeExecutor,
    RemoteExecutorUnavailable,
    add_serializers,
    grpc_runtime,
    shard_of,
)
from agent_memory.placeholders import parse_memory_refs


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path, workers=2) as c:
        yield c


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
    async with Cluster(tmp_path, workers=0) as lonely:
        executor = RemoteCodeExecutor(lonely.client, user_id="dave", thread_id="t", address=lonely.address)
        with pytest.raises(RemoteExecutorUnavailable, match="agent-memory runtime worker"):
            await executor.execute_code_blocks(
                [CodeBlock(language="bash", code=f"touch {tmp_path}/ran-here")], CancellationToken()
            )
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


async def test_a_remote_run_streams_its_output_tail_to_the_team_while_it_runs(
    cluster: Cluster, store: MemoryStore, user_id: str
) -> None:
    # Prints a line, then waits (at most 60 s) for the test to create `go` in its work directory on the worker.
    code = (
        "```python\nimport os, time\nprint('step 1 of 2', flush=True)\nend = time.time() + 60\n"
        "while not os.path.exists('go') and time.time() < end:\n    time.sleep(0.02)\nprint('done')\n```"
    )
    agent = ExecutorAgent("executor", remote(cluster, user_id, thread="live"), store=store, user_id=user_id)
    progress: list[CodeProgressEvent] = []
    async for item in agent.on_messages_stream([TextMessage(content=code, source="coder")], CancellationToken()):
        if isinstance(item, CodeProgressEvent):
            progress.append(item)
            if "step 1 of 2" in item.tail:  # seen live, from the worker: now let the code end
                for work_dir in cluster.homes[shard_of(user_id, 2)].glob("work/*/live-*"):
                    (work_dir / "go").touch()
        final = item

    assert any("step 1 of 2" in p.tail and p.output_bytes >= len("step 1 of 2\n") for p in progress)
    assert "done" in final.chat_message.to_text()  # type: ignore[union-attr]


async def test_two_chat_processes_running_code_on_one_worker_at_once_each_get_their_own_output(
    tmp_path: Path,
) -> None:
    # Both clients number their requests from the same start; AutoGen's host keys the answers it awaits by target
    # process and request id (microsoft/autogen#7016), so without distinct ids the answers could be swapped.
    single = Cluster(tmp_path, workers=1)
    await single.start()
    second = grpc_runtime(single.address)
    add_serializers(second)
    await second.start()
    code = "echo output of {user}; touch started; i=0; "
    code += "while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done"
    try:
        runs = {
            user: asyncio.ensure_future(
                RemoteCodeExecutor(client, user_id=user, thread_id="t", address=single.address).execute_code_blocks(
                    [CodeBlock(language="bash", code=code.format(user=user))], CancellationToken()
                )
            )
            for user, client in (("alice", single.client), ("bob", second))
        }
        await wait_until(lambda: len(list(single.homes[0].glob("work/*/t-*/started"))) == 2)  # both in flight
        for started in single.homes[0].glob("work/*/t-*/started"):
            (started.parent / "go").touch()
        results = {user: await asyncio.wait_for(run, 60) for user, run in runs.items()}
    finally:
        await second.stop()
        await single.stop()

    assert {user: r.output.strip() for user, r in results.items()} == {"alice": "output of alice",
                                                                         "bob": "output of bob"}  # fmt: skip
