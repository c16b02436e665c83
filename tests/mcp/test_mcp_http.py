"""`agent-memory mcp --http HOST:PORT` as a real subprocess: bearer tokens, 401s, per-user scoping over HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from autogen_core.tools import TextResultContent
from autogen_ext.tools.mcp import McpWorkbench, StreamableHttpServerParams
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError
from mcp.types import TextContent
from support.servers import free_port, running_server

from agent_memory import MemoryStore
from agent_memory.auth import TokenManager
from agent_memory.mcp import SessionEndFilter

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-http") / "server.log"


@pytest.fixture(scope="module")
def server_url(server_log: Path, database_url: str) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [str(Path(sys.executable).parent / "agent-memory"), "mcp", "--http", f"127.0.0.1:{port}"]

    def answers() -> bool:  # it answers 401 without a token once it is up
        return httpx.post(url, json=INITIALIZE, headers=ACCEPT, timeout=2).status_code == 401

    with running_server(argv, dict(os.environ), server_log, answers, name="MCP HTTP server"):
        yield url


def test_the_server_says_where_it_listens(server_url: str, server_log: Path) -> None:
    assert f"agent-memory MCP server on {server_url} " in server_log.read_text()


@pytest.fixture
async def token(store: MemoryStore, user_id: str) -> str:
    return (await TokenManager(store.db).create(user_id, name="test")).token


@pytest.fixture
async def other_token(store: MemoryStore, other_user_id: str) -> str:
    return (await TokenManager(store.db).create(other_user_id, name="test")).token


@asynccontextmanager
async def connect(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def ok(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent


def error_text(result: Any) -> str:
    assert result.isError
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def test_no_token_is_401_and_nothing_is_served(server_url: str) -> None:
    response = httpx.post(server_url, json=INITIALIZE, headers=ACCEPT)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "mcp-session-id" not in response.headers
    assert response.json()["error"] == "invalid_token"


@pytest.mark.parametrize(
    "authorization",
    ["Bearer amt_not-a-real-token", "Bearer x", "Basic dXNlcjpwYXNz", "amt_missing-scheme", "Bearer " + "a" * 4000],
)
def test_bad_tokens_are_401(server_url: str, authorization: str) -> None:
    response = httpx.post(server_url, json=INITIALIZE, headers={**ACCEPT, "Authorization": authorization})
    assert response.status_code == 401


async def test_valid_token_serves_its_user(server_url: str, token: str, store: MemoryStore, user_id: str) -> None:
    key = await store.store("one\nERROR two\nthree\n", user_id=user_id, description="seeded")
    async with connect(server_url, token) as session:
        assert len((await session.list_tools()).tools) == 9
        assert (await ok(session, "retrieve_memory", key=key, grep="ERROR"))["content"] == "2:ERROR two"
        stored = await ok(session, "store_memory", content="via http", description="http note")
        assert [str(r.uri) for r in (await session.list_resources()).resources] == [
            f"memory://{stored['key']}",
            f"memory://{key}",
        ]
    assert await store.retrieve(stored["key"], user_id=user_id) == "via http"
    item = await store.get(stored["key"], user_id=user_id)
    assert item.metadata == {"source": "mcp"}


async def test_two_users_never_see_each_others_data(
    server_url: str, token: str, other_token: str, user_id: str, other_user_id: str
) -> None:
    async with connect(server_url, token) as alice, connect(server_url, other_token) as bob:
        secret = await ok(alice, "store_memory", content="alice's api key is AK-99812", description="alice secret")
        await ok(bob, "store_memory", content="bob's grocery list", description="bob note")

        # Bob, whatever he passes, cannot reach Alice's memory.
        for args in ({"key": secret["key"]}, {"key": secret["key"], "user_id": user_id, "user": user_id}):
            result = await bob.call_tool("retrieve_memory", args)
            assert "no memory with key" in error_text(result) and "AK-99812" not in error_text(result)
        assert (await ok(bob, "search_memory", query="alice api key AK-99812"))["results"] == []
        assert [m["description"] for m in (await ok(bob, "list_memories"))["memories"]] == ["bob note"]
        assert (await ok(bob, "memory_stats"))["total_memories"] == 1
        assert "no memory with key" in error_text(await bob.call_tool("delete_memory", {"key": secret["key"]}))
        with pytest.raises(McpError):
            await bob.read_resource(f"memory://{secret['key']}")  # type: ignore[arg-type]
        assert [r.title for r in (await bob.list_resources()).resources] == ["bob note"]

        # Alice still has it, untouched.
        assert (await ok(alice, "retrieve_memory", key=secret["key"]))["content"] == "alice's api key is AK-99812"
        assert [m["description"] for m in (await ok(alice, "list_memories"))["memories"]] == ["alice secret"]


def test_a_session_cannot_be_used_with_another_users_token(server_url: str, token: str, other_token: str) -> None:
    opened = httpx.post(server_url, json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {token}"})
    assert opened.status_code == 200
    session_id = opened.headers["mcp-session-id"]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_stats", "arguments": {}}}
    hijack = httpx.post(
        server_url,
        json=call,
        headers={**ACCEPT, "Authorization": f"Bearer {other_token}", "mcp-session-id": session_id,
                 "mcp-protocol-version": "2025-06-18"},
    )  # fmt: skip
    assert hijack.status_code == 404


async def test_revoked_token_is_refused_at_the_next_request(server_url: str, store: MemoryStore, user_id: str) -> None:
    tokens = TokenManager(store.db)
    created = await tokens.create(user_id)
    headers = {**ACCEPT, "Authorization": f"Bearer {created.token}"}
    async with httpx.AsyncClient() as http:
        assert (await http.post(server_url, json=INITIALIZE, headers=headers)).status_code == 200
        await tokens.revoke(created.info.id)
        assert (await http.post(server_url, json=INITIALIZE, headers=headers)).status_code == 401


async def test_bad_input_over_http_keeps_the_server_running(server_url: str, token: str) -> None:
    async with connect(server_url, token) as session:
        assert "invalid grep" in error_text(
            await session.call_tool("retrieve_memory", {"key": "cmd_000000000000", "grep": "[z-a]"})
        )
        assert "valid integer" in error_text(await session.call_tool("search_memory", {"query": "x", "limit": "ten"}))
        assert "content is empty" in error_text(
            await session.call_tool("store_memory", {"content": "", "description": "d"})
        )
        assert (await ok(session, "memory_stats"))["total_memories"] == 0
    async with connect(server_url, token) as again:
        assert (await ok(again, "memory_stats"))["total_memories"] == 0


async def test_oversize_content_over_http_is_a_tool_error_not_a_transport_failure(server_url: str, token: str) -> None:
    async with connect(server_url, token) as session:
        result = await session.call_tool("store_memory", {"content": "y" * 11_000_000, "description": "too big"})
        assert "content is 11000000 bytes; this tool stores at most 10485760 bytes" in error_text(result)
        assert (await ok(session, "memory_stats"))["total_memories"] == 0


async def test_autogen_workbench_over_http_with_a_bearer_token(server_url: str, token: str) -> None:
    params = StreamableHttpServerParams(url=server_url, headers={"Authorization": f"Bearer {token}"})
    async with McpWorkbench(params) as wb:
        stored = await wb.call_tool("store_memory", {"content": "prefers pnpm over npm", "description": "pkg manager"})
        assert not stored.is_error
        listed = await wb.call_tool("list_memories", {})
        text = "".join(p.content for p in listed.result if isinstance(p, TextResultContent))
        assert "pkg manager" in text


# Kept last in the module: by now the sessions of the tests above have ended, each with a DELETE.
def test_sessions_that_end_normally_leave_no_error_in_the_server_log(server_log: Path) -> None:
    log = server_log.read_text()
    assert log.count("Terminating session") >= 5
    assert "ERROR" not in log
    assert "Traceback" not in log


def test_the_session_end_filter_drops_only_the_closed_stream_report() -> None:
    closed = logging.LogRecord("mcp.server.streamable_http", logging.ERROR, __file__, 1, SessionEndFilter.MESSAGE,
                               None, (anyio.ClosedResourceError, anyio.ClosedResourceError(), None))  # fmt: skip
    other = logging.LogRecord("mcp.server.streamable_http", logging.ERROR, __file__, 1, SessionEndFilter.MESSAGE,
                              None, (ValueError, ValueError("real fault"), None))  # fmt: skip
    assert not SessionEndFilter().filter(closed)
    assert SessionEndFilter().filter(other)


async def test_one_user_cannot_take_every_session_of_the_server(server_url: str, token: str, other_token: str) -> None:
    # The server runs with the default cap of 20 open sessions per user.
    async with httpx.AsyncClient(timeout=30) as client:
        mine = {**ACCEPT, "Authorization": f"Bearer {token}"}
        opened = []
        for _ in range(20):
            response = await client.post(server_url, json=INITIALIZE, headers=mine)
            assert response.status_code == 200
            opened.append(response.headers["mcp-session-id"])

        asked = time.monotonic()
        refused = await client.post(server_url, json=INITIALIZE, headers=mine)
        refused_after = time.monotonic() - asked
        theirs = await client.post(
            server_url, json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {other_token}"}
        )
        # Ending one of the user's sessions makes room again.
        ended = await client.delete(server_url, headers={**mine, "mcp-session-id": opened[0]})
        again = await client.post(server_url, json=INITIALIZE, headers=mine)

    assert refused.status_code == 429 and "20 open MCP sessions" in refused.json()["error_description"]
    assert refused_after >= 1.0  # the tarpit: a flood of refused requests gets one answer a second per connection
    assert theirs.status_code == 200  # another user is not affected
    assert ended.status_code == 200 and again.status_code == 200


async def test_concurrent_requests_cannot_open_more_sessions_than_the_cap(server_url: str, token: str) -> None:
    headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60) as client:
        answers = await asyncio.gather(*(client.post(server_url, json=INITIALIZE, headers=headers) for _ in range(30)))
    assert sorted(a.status_code for a in answers) == [200] * 20 + [429] * 10


DEEP_JSON = b"[" * 100_000 + b"]" * 100_000  # valid JSON, deeper than json.loads goes (RecursionError)


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[]", b'{"jsonrpc": "2.0"}', b'"just a string"', b"\xff\xfe\x00", b"{" * 10_000, DEEP_JSON],
)
def test_a_malformed_body_is_400_not_a_server_error(server_url: str, token: str, body: bytes) -> None:
    headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
    assert httpx.post(server_url, content=body, headers=headers, timeout=30).status_code == 400


def test_a_body_over_the_limit_gets_a_413_that_says_what_to_do(server_url: str, token: str) -> None:
    # 6 MB of control characters is under the store's 10 MB limit, but 36 MB as JSON.
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "store_memory", "arguments": {"content": "\x1b" * 6_000_000}}})  # fmt: skip
    headers = {**ACCEPT, "Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    answer = httpx.post(server_url, content=body.encode(), headers=headers, timeout=60)
    assert answer.status_code == 413
    assert "agent-memory store FILE" in answer.json()["error"]["message"]
