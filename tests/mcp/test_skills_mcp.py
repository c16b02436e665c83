"""Skill tools of the MCP server: list, show, approve, reject, disable, export; for the server's user only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import TextContent
from support.skills import procedural_memory

from agent_memory import MemoryStore
from agent_memory.mcp import SKILL_TOOL_NAMES, create_server
from agent_memory.skills import ProceduralMemory, ProceduralMemorySettings

ADD = "def add_numbers(a: int, b: int) -> int:\n    return a + b\n"


@asynccontextmanager
async def connect(store: MemoryStore, user_id: str) -> AsyncIterator[ClientSession]:
    async with create_connected_server_and_client_session(create_server(store, user_id=user_id)) as session:
        yield session


async def call(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent


@pytest.fixture
def skills_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_SKILLS_ENABLED", "true")


async def pending(store: MemoryStore, user: str, tmp_path: Path) -> ProceduralMemory:
    skills = procedural_memory(store, user, work_dir=tmp_path,
                               settings=ProceduralMemorySettings(require_skill_approval=True))  # fmt: skip
    await skills.register_skill("add_numbers", "Add two integers", ADD)
    return skills


async def test_without_procedural_memory_the_server_has_no_skill_tools(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_MEMORY_SKILLS_ENABLED", raising=False)
    async with connect(store, user_id) as session:
        names = {t.name for t in (await session.list_tools()).tools}
    assert names.isdisjoint(SKILL_TOOL_NAMES)


@pytest.mark.usefixtures("skills_enabled")
async def test_list_show_approve_export(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = await pending(store, user_id, tmp_path)
    async with connect(store, user_id) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(SKILL_TOOL_NAMES) <= set(tools)
        assert all(not any("user" in p for p in tools[n].inputSchema.get("properties", {})) for n in SKILL_TOOL_NAMES)

        listed = await call(session, "list_skills", status="pending_approval")
        assert [(s["name"], s["status"]) for s in listed["skills"]] == [("add_numbers", "pending_approval")]
        shown = await call(session, "show_skill", name="add_numbers")
        assert shown["code"] == ADD and shown["history"][0]["version"] == 1
        approved = await call(session, "approve_skill", name="add_numbers")
        assert approved["skill"]["status"] == "active"
        exported = await call(session, "export_skill", name="add_numbers")
        assert exported["folder"] == "add-numbers"
        assert exported["files"]["scripts/add_numbers.py"] == ADD
        assert exported["files"]["SKILL.md"].startswith("---\nname: add-numbers\n")
        disabled = await call(session, "disable_skill", name="add_numbers", agent="coder")
        assert disabled["skill"]["status"] == "disabled"
        assert (await call(session, "reject_skill", name="add_numbers"))["skill"]["status"] == "rejected"
    assert (await skills.get_skill("add_numbers")).status == "rejected"


@pytest.mark.usefixtures("skills_enabled")
async def test_another_users_skills_are_invisible(
    store: MemoryStore, user_id: str, other_user_id: str, tmp_path: Path
) -> None:
    await pending(store, user_id, tmp_path)
    async with connect(store, other_user_id) as session:
        assert (await call(session, "list_skills"))["skills"] == []
        for tool in ("show_skill", "approve_skill", "export_skill"):
            result = await session.call_tool(tool, {"name": "add_numbers"})
            assert result.isError
            block = result.content[0]
            assert isinstance(block, TextContent) and "skill 'add_numbers' not found" in block.text
