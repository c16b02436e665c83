"""The MCP server through an in-process client session (mcp.shared.memory): tools, schemas, resources, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import CallToolResult, TextContent

from agent_memory import MemoryStore
from agent_memory.mcp import create_server
from agent_memory.placeholders import parse_memory_refs

TOOLS = {
    "store_memory", "retrieve_memory", "search_memory", "list_memories", "delete_memory", "memory_stats",
    "update_memory", "memory_history", "retract_memory",
}  # fmt: skip


@asynccontextmanager
async def connect(store: MemoryStore, user_id: str) -> AsyncIterator[ClientSession]:
    # A context manager inside each test, not an async fixture: the SDK's anyio task group must be entered
    # and exited in the same task, and pytest-asyncio runs fixture setup and teardown in different tasks.
    async with create_connected_server_and_client_session(create_server(store, user_id=user_id)) as s:
        yield s


def text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def ok(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert not result.isError, text(result)
    assert result.structuredContent is not None
    return result.structuredContent


async def test_lists_the_six_tools_with_descriptions_and_schemas(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and len(tool.description) > 40
            assert tool.outputSchema is not None and tool.outputSchema["type"] == "object"
            assert not any("user" in p for p in tool.inputSchema.get("properties", {}))
        retrieve = tools["retrieve_memory"].inputSchema
        assert retrieve["required"] == ["key"]
        assert retrieve["properties"]["context"]["maximum"] == 100
        assert {"grep", "lines", "head", "tail", "ignore_case", "max_chars"} <= set(retrieve["properties"])
        assert set(tools["retrieve_memory"].outputSchema["properties"]) >= {
            "content",
            "truncated",
            "hint",
            "total_lines",
        }
        assert {"memory_type", "thread_id", "agent_id", "since"} <= set(
            tools["list_memories"].inputSchema["properties"]
        )
        assert tools["delete_memory"].annotations is not None and tools["delete_memory"].annotations.destructiveHint


async def test_store_retrieve_search_list_delete_round_trip(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        content = "".join(f"step {i}: ok\n" for i in range(1, 400)) + "step 400: FAILED disk quota exceeded\n"
        stored = await ok(
            session, "store_memory", content=content, description="build log", memory_type="command_output"
        )
        key = stored["key"]
        assert parse_memory_refs(stored["placeholder"])[0].key == key

        full = await ok(session, "retrieve_memory", key=key)
        assert full["content"] == content and full["truncated"] is False

        grep = await ok(session, "retrieve_memory", key=key, grep="FAILED", context=1)
        assert grep["content"] == "399-step 399: ok\n400:step 400: FAILED disk quota exceeded"

        found = await ok(session, "search_memory", query="disk quota exceeded")
        assert [r["key"] for r in found["results"]][:1] == [key]

        listed = await ok(session, "list_memories", memory_type="command_output", since="1h")
        assert [m["key"] for m in listed["memories"]] == [key]

        assert (await ok(session, "delete_memory", key=key))["deleted"] is True
        gone = await session.call_tool("retrieve_memory", {"key": key})
        assert gone.isError and "no memory with key" in text(gone)


async def test_text_content_is_the_compact_rendering(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        stored = await session.call_tool("store_memory", {"content": "a\nb\n", "description": "two lines"})
        assert text(stored).startswith("Stored as [MemoryRef: ")
        got = await session.call_tool("retrieve_memory", {"key": stored.structuredContent["key"], "head": 1})  # type: ignore[index]
        assert text(got).endswith("view: head=1]\na\n")


async def test_big_content_is_capped_and_says_how_to_continue(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        content = "".join(f"row {i:06d} " + "x" * 80 + "\n" for i in range(5000))
        key = (await ok(session, "store_memory", content=content, description="big"))["key"]
        got = await ok(session, "retrieve_memory", key=key)
        assert got["truncated"] is True
        assert len(got["content"]) <= 16_000 and content.startswith(got["content"])
        assert "lines='" in got["hint"]
        assert got["total_lines"] == 5000


async def test_stats_by_type(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        await ok(session, "store_memory", content="prefers tabs", description="indent", memory_type="user_preference")
        await ok(session, "store_memory", content="a note", description="n")
        stats = await ok(session, "memory_stats")
        assert stats["total_memories"] == 2
        assert stats["by_type"]["user_preference"]["count"] == 1 and stats["by_type"]["note"]["count"] == 1


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("retrieve_memory", {"key": "cmd_000000000000"}, "no memory with key 'cmd_000000000000'"),
        ("retrieve_memory", {"key": "cmd_000000000000", "grep": "(unclosed"}, "invalid grep regular expression"),
        ("retrieve_memory", {"key": "cmd_000000000000", "head": "many"}, "valid integer"),
        ("retrieve_memory", {"key": "cmd_000000000000", "lines": "x-y"}, "START-END"),
        ("retrieve_memory", {}, "key"),
        ("store_memory", {"content": "", "description": "d"}, "content is empty"),
        ("store_memory", {"content": "x", "description": "d", "memory_type": "t" * 51}, "50 characters"),
        ("search_memory", {"query": "x", "limit": 0}, "greater than or equal to 1"),
        ("list_memories", {"since": "last tuesday"}, "neither an ISO date/time"),
        ("delete_memory", {"key": 42}, "valid string"),
    ],
)
async def test_bad_input_is_a_tool_error_and_the_server_keeps_running(
    store: MemoryStore, user_id: str, tool: str, args: dict[str, Any], message: str
) -> None:
    async with connect(store, user_id) as session:
        result = await session.call_tool(tool, args)
        assert result.isError
        assert message in text(result)
        assert (await ok(session, "memory_stats"))["total_memories"] >= 0


async def test_an_unexpected_database_error_is_a_tool_error_without_the_databases_text(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def failing(**_: object) -> None:
        raise asyncpg.exceptions.UniqueViolationError('duplicate key value violates unique constraint "secret_pkey"')

    async with connect(store, user_id) as session:
        monkeypatch.setattr(store, "stats", failing)
        result = await session.call_tool("memory_stats", {})

    assert result.isError
    assert "secret_pkey" not in text(result) and "its log has the details under reference" in text(result)
    reference = text(result).rsplit(" ", 1)[-1]
    assert any(reference in record.getMessage() and record.exc_info for record in caplog.records)


async def test_huge_content_is_refused_with_a_clear_message(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        result = await session.call_tool(
            "store_memory", {"content": "x" * (10 * 1024 * 1024 + 1), "description": "huge"}
        )
        assert result.isError
        assert "this tool stores at most 10485760 bytes" in text(result)
        assert (await ok(session, "memory_stats"))["total_memories"] == 0


async def test_memories_are_resources(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        key = (await ok(session, "store_memory", content="résumé\x00exact\r\n", description="odd bytes"))["key"]
        resources = (await session.list_resources()).resources
        assert [(str(r.uri), r.name, r.title) for r in resources] == [(f"memory://{key}", key, "odd bytes")]
        templates = (await session.list_resource_templates()).resourceTemplates
        assert [t.uriTemplate for t in templates] == ["memory://{key}"]
        read = await session.read_resource(f"memory://{key}")  # type: ignore[arg-type]
        assert [getattr(c, "text", None) for c in read.contents] == ["résumé\x00exact\r\n"]


async def test_reading_an_unknown_resource_is_an_error(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        with pytest.raises(McpError, match="no memory with key"):
            await session.read_resource("memory://note_ffffffffffff")  # type: ignore[arg-type]


async def test_stdio_style_server_serves_only_its_user(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    async with (
        create_connected_server_and_client_session(create_server(store, user_id=user_id)) as mine,
        create_connected_server_and_client_session(create_server(store, user_id=other_user_id)) as theirs,
    ):
        secret = await ok(theirs, "store_memory", content="their secret 7731", description="secret")
        # Extra arguments naming a user are ignored: the server's user is fixed.
        probe = await mine.call_tool("retrieve_memory", {"key": secret["key"], "user_id": other_user_id})
        assert probe.isError and "no memory with key" in text(probe)
        assert (await ok(mine, "search_memory", query="their secret 7731"))["results"] == []
        assert (await ok(mine, "list_memories"))["memories"] == []
        assert (await mine.list_resources()).resources == []
        with pytest.raises(McpError):
            await mine.read_resource(f"memory://{secret['key']}")  # type: ignore[arg-type]
        assert (await ok(theirs, "retrieve_memory", key=secret["key"]))["content"] == "their secret 7731"


def test_server_needs_exactly_one_scoping(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="exactly one of user_id"):
        create_server(store)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:8765", ("127.0.0.1", 8765)),
        ("[::1]:9000", ("::1", 9000)),
        (":8765", ("127.0.0.1", 8765)),
        ("8765", ("127.0.0.1", 8765)),
    ],
)
def test_http_address_defaults_to_loopback(value: str, expected: tuple[str, int]) -> None:
    from agent_memory.cli._mcp import parse_host_port

    assert parse_host_port(value) == expected


@pytest.mark.parametrize("value", ["abc", "host:", "99999", "127.0.0.1:0"])
def test_a_bad_http_address_is_a_usage_error(value: str) -> None:
    from agent_memory.cli._mcp import parse_host_port

    with pytest.raises(ValueError, match=r"--http expects \[HOST:\]PORT"):
        parse_host_port(value)


async def test_a_costly_grep_is_a_tool_error_and_the_server_keeps_running(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_GREP_TIMEOUT_SECONDS", "0.3")
    async with connect(store, user_id) as session:
        key = (await ok(session, "store_memory", content="a" * 40 + "b", description="bomb target"))["key"]
        result = await session.call_tool("retrieve_memory", {"key": key, "grep": r"(a|aa)+$"})
        assert result.isError and "too costly" in text(result)
        assert (await ok(session, "retrieve_memory", key=key, grep="b$"))["content"] == "1:" + "a" * 40 + "b"


async def test_update_history_and_retract_over_mcp(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        key = (await ok(session, "store_memory", content="tabs", description="indent: tabs"))["key"]
        updated = await ok(session, "update_memory", key=key, content="4 spaces", description="indent: 4 spaces")
        retracted = await ok(session, "retract_memory", key=key, reason="the user has no preference after all")
        history = await ok(session, "memory_history", key=key)

    assert updated["version"] == 2 and retracted["status"] == "retracted"
    assert [(v["version"], v["surface"], v["current"]) for v in history["versions"]] == [
        (1, "mcp", False),
        (2, "mcp", True),
    ]
    assert history["status"] == "retracted" and history["status_reason"] == "the user has no preference after all"
    assert await store.retrieve_version(key, 1, user_id=user_id) == "tabs"
    assert [e.action for e in await store.audit_log(user_id=user_id, key=key)] == ["retract", "update", "store"]


async def test_another_users_key_cannot_be_updated_over_mcp(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    key = await store.store("mine", user_id=user_id)
    async with connect(store, other_user_id) as session:
        result = await session.call_tool("update_memory", {"key": key, "content": "theirs"})
    assert result.isError and f"no memory with key {key!r}" in text(result)
    assert await store.retrieve(key, user_id=user_id) == "mine"


async def test_search_hits_say_which_rankers_found_them(store: MemoryStore, user_id: str) -> None:
    async with connect(store, user_id) as session:
        await ok(session, "store_memory", content="pytest: 3 failed, ERROR in test_login", description="test run")
        hits = (await ok(session, "search_memory", query="failed test_login"))["results"]
    assert set(hits[0]["why"]) <= {"key", "fts", "trigram", "dense"} and hits[0]["why"]
    assert all(0 <= e["evidence"] <= 1 and e["rank"] >= 1 for e in hits[0]["why"].values())
