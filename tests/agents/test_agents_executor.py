"""The executor: real processes, real process groups, real PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import CodeExecutionEvent, TextMessage
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock
from support.databases import open_store
from support.processes import marker_seconds, processes_with, wait_until
from support.scripted_llm import ScriptedLLM

from agent_memory import MemoryStore
from agent_memory.agents import (
    AgentBuilder,
    ExecutorAgent,
    LocalProcessGroupExecutor,
    MemoryStoredEvent,
    SandboxPolicy,
)
from agent_memory.placeholders import parse_memory_refs


async def run_stream(agent: ExecutorAgent, code: str) -> list[Any]:
    """Everything the executor agent yields for one message of the coder holding ``code``."""
    message = TextMessage(content=code, source="coder")
    return [item async for item in agent.on_messages_stream([message], CancellationToken())]


async def test_timeout_kills_the_whole_process_tree(tmp_path: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=1, work_dir=tmp_path)
    marker = marker_seconds()
    code = f"sleep {marker} &\nbash -c 'sleep {marker}' &\necho started\nsleep {marker}\n"

    result = await executor.execute_code_blocks([CodeBlock(code, "bash")], CancellationToken())

    assert result.exit_code == 124
    assert result.timed_out
    assert "started" in result.output
    assert processes_with(f"sleep {marker}") == []


async def test_background_children_of_a_finished_script_do_not_hang_or_survive(tmp_path: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=tmp_path)
    marker = marker_seconds()

    result = await executor.execute_code_blocks(
        [CodeBlock(f"sleep {marker} &\necho done\n", "bash")], CancellationToken()
    )

    assert (result.exit_code, result.output, result.timed_out) == (0, "done\n", False)
    assert processes_with(f"sleep {marker}") == []


async def test_cancelling_the_token_kills_the_running_tree(tmp_path: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=60, work_dir=tmp_path)
    marker = marker_seconds()
    token = CancellationToken()
    task = asyncio.create_task(
        executor.execute_code_blocks([CodeBlock(f"sleep {marker} &\nsleep {marker}\n", "bash")], token)
    )
    await wait_until(lambda: len(processes_with(f"sleep {marker}")) == 2)

    token.cancel()
    result = await task

    assert result.exit_code == 125
    assert processes_with(f"sleep {marker}") == []


async def test_stdout_and_stderr_are_interleaved_and_nonzero_exit_stops_later_blocks(tmp_path: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=tmp_path)
    blocks = [CodeBlock("echo one\necho two >&2\necho three\nexit 7\n", "bash"), CodeBlock("print('never')", "python")]

    result = await executor.execute_code_blocks(blocks, CancellationToken())

    assert result.exit_code == 7
    assert result.output == "one\ntwo\nthree\n"


async def test_output_beyond_the_cap_is_counted_not_kept(tmp_path: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=tmp_path, max_output_bytes=1000)

    result = await executor.execute_code_blocks([CodeBlock("print('x' * 5000)", "python")], CancellationToken())

    assert result.exit_code == 0
    assert result.output == "x" * 1000
    assert result.truncated
    assert result.output_bytes == 5001


async def test_code_runs_in_the_work_directory(tmp_path: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=tmp_path / "w")

    result = await executor.execute_code_blocks(
        [CodeBlock("import os; print(os.getcwd())", "python")], CancellationToken()
    )

    assert result.output.strip() == str((tmp_path / "w").resolve())


async def test_executor_config_round_trips(tmp_path: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=7, work_dir=tmp_path, max_output_bytes=4096)

    loaded = LocalProcessGroupExecutor.load_component(executor.dump_component())

    assert isinstance(loaded, LocalProcessGroupExecutor)
    assert (loaded.timeout, loaded.work_dir, loaded.max_output_bytes) == (7, tmp_path, 4096)


async def test_small_output_is_posted_inline_with_status(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    agent = ExecutorAgent("executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=store, user_id=user_id)

    response = await agent.on_messages(
        [TextMessage(content="```bash\necho hello\n```", source="coder")], CancellationToken()
    )

    assert response.chat_message.to_text().startswith("Exit code 0 (success)")
    assert "hello" in response.chat_message.to_text()
    assert await store.list(user_id=user_id) == []


async def test_large_output_is_stored_and_only_placeholder_excerpt_and_status_are_posted(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    agent = ExecutorAgent(
        "executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=store, user_id=user_id, thread_id="t-9"
    )
    code = "```bash\nseq 1 20000\necho 'error: disk quota exceeded' >&2\nexit 2\n```"

    items = await run_stream(agent, code)

    stored = [i for i in items if isinstance(i, MemoryStoredEvent)]
    executions = [i for i in items if isinstance(i, CodeExecutionEvent)]
    posted = items[-1].chat_message.to_text()  # type: ignore[union-attr]
    assert len(stored) == 1 and len(executions) == 1
    assert executions[0].result.output == posted  # the event stream carries the compact form too
    [ref] = parse_memory_refs(posted)
    assert ref.key == stored[0].memory_key
    assert "FAILED with exit code 2" in posted
    assert "error: disk quota exceeded" in posted
    assert len(posted) < 3000
    full = await store.retrieve(ref.key, user_id=user_id)
    assert full == "".join(f"{i}\n" for i in range(1, 20001)) + "error: disk quota exceeded\n"


async def test_only_the_coders_code_runs(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    agent = ExecutorAgent(
        "executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=store, user_id=user_id, sources=["coder"]
    )

    response = await agent.on_messages(
        [TextMessage(content="```bash\ntouch pwned\n```", source="user")], CancellationToken()
    )

    assert "No code blocks" in response.chat_message.to_text()
    assert not (tmp_path / "pwned").exists()


async def test_cancelling_a_team_run_leaves_no_orphan_process(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    marker = marker_seconds()
    scripted_llm.add(f"```bash\nsleep {marker} &\npython3 -c 'import time; time.sleep({marker})'\n```")
    session = await AgentBuilder(store, user_id, model_client=scripted_llm.model_client()).build()
    token = CancellationToken()
    seen: list[object] = []

    async def consume() -> None:
        async for item in session.run_stream("Run the long job.", cancellation_token=token):
            seen.append(item)

    run = asyncio.create_task(consume())
    await wait_until(lambda: len(processes_with(marker)) == 2)
    token.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await session.close()

    assert processes_with(marker) == []
    assert not any(isinstance(i, TaskResult) for i in seen)


SECRETS = {
    "OPENAI_API_KEY": "sk-secret-value",
    "AGENT_MEMORY_DATABASE_URL": "postgresql://u:pw@db/x",
    "MY_SERVICE_TOKEN": "tok-123",
    "DB_PASS": "hunter2",
    "MONGODB_URI": "mongodb://admin:mongo-pw@db",
    "REDIS_URL": "redis://:redis-pw@cache",
    "PIP_INDEX_URL": "https://user:pip-pw@pypi.example/simple",
    "GH_PAT": "ghp_abcdef",
}


async def test_code_sees_only_allowlisted_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=tmp_path, extra_env={"GIVEN": "yes"})

    result = await executor.execute_code_blocks([CodeBlock("env", "bash")], CancellationToken())

    names = {line.split("=", 1)[0] for line in result.output.splitlines()}
    assert not any(value in result.output for value in SECRETS.values())
    # An allowlist, not a denylist: an unknown name is not passed either.
    assert names <= {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "TMPDIR", "PYTHONDONTWRITEBYTECODE", "GIVEN",
                     "PWD", "SHLVL", "_"}  # fmt: skip
    assert "GIVEN=yes" in result.output


async def test_variables_named_in_the_policy_are_passed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=tmp_path, sandbox=SandboxPolicy(env=["HARMLESS_SETTING"]))

    result = await executor.execute_code_blocks([CodeBlock("env", "bash")], CancellationToken())

    assert "HARMLESS_SETTING=visible" in result.output


async def test_binary_output_is_escaped_and_flagged(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    agent = ExecutorAgent("executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=store, user_id=user_id)

    response = await agent.on_messages(
        [TextMessage(content="```python\nimport sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe')\n```", source="coder")],
        CancellationToken(),
    )

    text = response.chat_message.to_text()
    assert "ok \\xff\\xfe" in text
    assert "not valid UTF-8" in text


async def test_cap_inside_a_multibyte_character_is_not_reported_as_binary(tmp_path: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=tmp_path, max_output_bytes=1001)

    result = await executor.execute_code_blocks([CodeBlock("print('é' * 1000)", "python")], CancellationToken())

    assert result.truncated and not result.not_utf8
    assert result.output == "é" * 500


async def test_docker_executor_without_the_docker_package_says_how_to_install_it(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("autogen_ext")
    try:
        import docker  # noqa: F401

        pytest.skip("the docker package is installed here")
    except ImportError:
        pass
    monkeypatch.setenv("AGENT_MEMORY_EXECUTOR", "docker")

    with pytest.raises(RuntimeError, match="autogen-ext\\[docker\\]"):
        AgentBuilder(store, user_id).build_code_executor("t1")


async def test_executor_agent_works_with_any_autogen_code_executor(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    import warnings

    from autogen_ext.code_executors.local import LocalCommandLineCodeExecutor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = LocalCommandLineCodeExecutor(work_dir=tmp_path, timeout=30)
    agent = ExecutorAgent("executor", plain, store=store, user_id=user_id)

    items = await run_stream(agent, "```bash\nseq 1 3000\n```")

    [stored] = [i for i in items if isinstance(i, MemoryStoredEvent)]
    item = await store.get(stored.memory_key, user_id=user_id)
    assert item.metadata["exit_code"] == 0
    assert isinstance(item.metadata["duration_s"], float)
    assert item.metadata["language"] == "bash"
    assert await store.retrieve(stored.memory_key, user_id=user_id) == "".join(f"{i}\n" for i in range(1, 3001))


async def test_database_down_keeps_the_output_inline_for_the_coders_context_to_offload_later(
    store: MemoryStore, database_url: str, user_id: str, tmp_path: Path
) -> None:
    """The one offloader's rule: while the database is unreachable the exact output stays inline."""
    from agent_memory.config import Settings

    broken = await MemoryStore.open(database_url, settings=Settings(database_url=database_url))
    await broken.close()
    agent = ExecutorAgent("executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=broken, user_id=user_id)

    items = await run_stream(agent, "```bash\nseq 1 3000\n```")

    posted = items[-1].chat_message.to_text()  # type: ignore[union-attr]
    assert not any(isinstance(i, MemoryStoredEvent) for i in items)
    status, rest = posted.split("\n", 1)
    assert status.startswith("Exit code 0 (success)")
    assert rest == "Output:\n" + "".join(f"{i}\n" for i in range(1, 3001))
    assert await store.list(user_id=user_id) == []


async def test_stored_output_is_described_like_memory_context_describes_it(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    from agent_memory.context import describe, excerpt

    agent = ExecutorAgent("executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=store, user_id=user_id)
    items = await run_stream(agent, "```bash\nseq 1 3000\n```")

    [stored] = [i for i in items if isinstance(i, MemoryStoredEvent)]
    output = "".join(f"{i}\n" for i in range(1, 3001))
    assert stored.description == describe(output, kind="bash: seq 1 3000")
    assert f"Excerpt:\n{excerpt(output, max_tokens=200)}\n" in items[-1].chat_message.to_text()  # type: ignore[union-attr]
    assert stored.metadata["offloaded_by"] == "ExecutorAgent"


def assert_not_stored_report(items: list[Any], reason: str) -> None:
    """The report of ``seq 1 12000`` that could not be stored: status, why, excerpt; never the raw output."""
    posted = items[-1].chat_message.to_text()
    assert not any(isinstance(i, MemoryStoredEvent) for i in items)
    status, rest = posted.split("\n", 1)
    assert status.startswith("Exit code 0 (success)")
    assert rest.startswith("The output (")
    assert f"could not be stored ({reason}" in rest
    assert "Excerpt:\n1\n2\n" in rest and rest.rstrip().endswith("12000")
    assert len(posted) < 1000


async def test_output_the_store_refuses_is_posted_as_status_excerpt_and_reason(
    database_url: str, user_id: str, tmp_path: Path
) -> None:
    """Refused by the store (over max_content_bytes): never the raw output, but why it was not stored."""
    async with await open_store(database_url, max_content_bytes=4096) as small:
        agent = ExecutorAgent("executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=small, user_id=user_id)
        items = await run_stream(agent, "```bash\nseq 1 12000\n```")
        assert await small.list(user_id=user_id) == []

    assert_not_stored_report(items, "ValueError: content is 60894 bytes; the limit is 4096")


async def test_an_unexpected_storage_error_posts_status_excerpt_and_error_and_the_run_goes_on(
    database_url: str, user_id: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A read-only database (not "unreachable", not a refusal): the team still gets a short report, no crash."""
    from agent_memory.config import Settings
    from agent_memory.store import Database

    settings = Settings(database_url=database_url)
    read_only_url = database_url + ("&" if "?" in database_url else "?") + "default_transaction_read_only=on"
    read_only = MemoryStore(await Database.connect(read_only_url, settings=settings, apply_schema=False), settings)
    try:
        agent = ExecutorAgent(
            "executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=read_only, user_id=user_id
        )
        items = await run_stream(agent, "```bash\nseq 1 12000\n```")
    finally:
        await read_only.close()

    assert_not_stored_report(items, "ReadOnlySQLTransactionError: ")
    [record] = [r for r in caplog.records if r.name == "agent_memory.agents._executor"]
    assert record.exc_info is not None and record.exc_info[0].__name__ == "ReadOnlySQLTransactionError"
