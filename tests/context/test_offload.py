"""The one offloader: what it tells its caller when it does not offload (small, or refused by the store)."""

from __future__ import annotations

from autogen_core.models import FunctionExecutionResult, FunctionExecutionResultMessage
from support.databases import open_store

from agent_memory import MemoryContext, MemoryStore
from agent_memory.context import OffloadedPart, Offloader, Refused


def numbered(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(n))


async def test_refused_content_comes_back_with_the_reason_and_the_excerpt(database_url: str, user_id: str) -> None:
    async with await open_store(database_url, max_content_bytes=4096) as small:

        async def get_store() -> MemoryStore:
            return small

        offloader = Offloader(
            get_store, user_id=user_id, agent_id=None, thread_id=None, threshold_tokens=100,
            excerpt_max_tokens=50, offloaded_by="test",
        )  # fmt: skip
        assert await offloader.offload("short", memory_type="note") is None
        text = numbered(2000)
        refused = await offloader.offload(text, memory_type="command_output")
        assert isinstance(refused, Refused)
        assert refused.reason == (
            f"ValueError: content is {len(text)} bytes; the limit is 4096 (AGENT_MEMORY_MAX_CONTENT_BYTES)"
        )
        assert refused.part.key is None and refused.part.pending_content is None
        assert refused.part.tokens > 100 and refused.part.excerpt.startswith("line 0\n")
        surrogate = await offloader.offload(numbered(200) + "\ud800", memory_type="note")
        assert isinstance(surrogate, Refused) and "lone surrogate" in surrogate.reason
        stored = await offloader.offload(numbered(300), memory_type="note")
        assert isinstance(stored, OffloadedPart) and stored.key is not None
        assert await small.list(user_id=user_id) != []


async def test_a_refused_tool_result_stays_in_its_slot_exactly(database_url: str, user_id: str) -> None:
    async with await open_store(database_url, max_content_bytes=4096) as small:
        ctx = MemoryContext(store=small, user_id=user_id, offload_threshold_tokens=100)
        message = FunctionExecutionResultMessage(
            content=[
                FunctionExecutionResult(call_id="c1", name="run_shell", content=numbered(2000), is_error=False),
                FunctionExecutionResult(call_id="c2", name="run_shell", content=numbered(300), is_error=False),
            ]
        )
        await ctx.add_message(message)
        [seen] = await ctx.get_messages()
        assert isinstance(seen, FunctionExecutionResultMessage)
        assert seen.content[0].content == numbered(2000)  # refused (over 4096 bytes): inline, unchanged
        assert seen.content[1].content != numbered(300) and len(ctx.memory_keys) == 1
