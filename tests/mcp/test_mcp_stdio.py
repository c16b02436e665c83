"""`agent-memory mcp --user U` as a real subprocess over stdio: the official client and AutoGen's McpWorkbench."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from autogen_core.tools import TextResultContent, ToolResult
from autogen_ext.tools.mcp import McpWorkbench, StdioServerParams
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent

from agent_memory import MemoryStore

pytestmark = pytest.mark.usefixtures("database_url")


def server_command(user: str) -> tuple[str, list[str]]:
    return sys.executable, ["-m", "agent_memory.cli", "mcp", "--user", user]


def env() -> dict[str, str]:
    # The subprocess reaches the test database through AGENT_MEMORY_DATABASE_URL (set by conftest).
    assert os.environ.get("AGENT_MEMORY_DATABASE_URL")
    return dict(os.environ)


def workbench_text(result: ToolResult) -> str:
    return "".join(part.content for part in result.result if isinstance(part, TextResultContent))


async def test_official_stdio_client_talks_to_the_subprocess(store: MemoryStore, user_id: str) -> None:
    key = await store.store("alpha\nbeta FATAL gamma\n", user_id=user_id, description="from the library")
    command, args = server_command(user_id)
    params = StdioServerParameters(command=command, args=args, env=env())
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.serverInfo.name == "agent-memory"
        assert init.instructions and "MemoryRef" in init.instructions
        assert len((await session.list_tools()).tools) == 9

        got = await session.call_tool("retrieve_memory", {"key": key, "grep": "FATAL"})
        assert not got.isError
        assert got.structuredContent is not None and got.structuredContent["content"] == "2:beta FATAL gamma"

        bad = await session.call_tool("retrieve_memory", {"key": key, "grep": "*oops"})
        assert bad.isError
        assert isinstance(bad.content[0], TextContent) and "invalid grep regular expression" in bad.content[0].text

        # Still serving after the error; what it stores lands in the same database under the same user.
        stored = await session.call_tool("store_memory", {"content": "via stdio", "description": "stdio note"})
        assert not stored.isError and stored.structuredContent is not None
    assert await store.retrieve(stored.structuredContent["key"], user_id=user_id) == "via stdio"


async def test_stdio_server_without_a_user_exits_with_usage_error() -> None:
    environment = {k: v for k, v in env().items() if k != "AGENT_MEMORY_USER"}
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "agent-memory"), "mcp", env=environment,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode == 2
    assert out == b"" and b"no user given" in err


async def test_autogen_mcp_workbench_calls_the_tools(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    foreign = await store.store("not yours", user_id=other_user_id, description="foreign")
    command, args = server_command(user_id)
    async with McpWorkbench(StdioServerParams(command=command, args=args, env=env(), read_timeout_seconds=60)) as wb:
        names = {t["name"] for t in await wb.list_tools()}
        assert names == {
            "store_memory", "retrieve_memory", "search_memory", "list_memories", "delete_memory", "memory_stats",
            "update_memory", "memory_history", "retract_memory",
        }  # fmt: skip

        stored = await wb.call_tool(
            "store_memory",
            {
                "content": "deploy needs VPN profile corp-eu-2",
                "description": "deploy prerequisite",
                "memory_type": "lesson",
            },
        )
        assert not stored.is_error and "Stored as [MemoryRef: lesson_" in workbench_text(stored)

        found = await wb.call_tool("search_memory", {"query": "VPN profile deploy"})
        assert "deploy prerequisite" in workbench_text(found)

        stats = await wb.call_tool("memory_stats", {})
        assert "lesson: 1 memories" in workbench_text(stats)

        probe = await wb.call_tool("retrieve_memory", {"key": foreign, "user_id": other_user_id})
        assert probe.is_error and "no memory with key" in workbench_text(probe)
        assert "not yours" not in workbench_text(probe)
