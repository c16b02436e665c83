"""The MCP HTTP server during a database outage: 503 with one clear message, one log line, back when it is."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from support.databases import fresh_database, open_store
from support.db_proxy import DatabaseProxy, database_proxy
from support.servers import free_port, running_server

from agent_memory.auth import TokenManager

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture
async def own_database(database_url: str) -> AsyncIterator[str]:
    async with fresh_database(database_url, prefix="am_mcp_outage") as url:
        yield url


@pytest.fixture
async def token(own_database: str, user_id: str) -> str:
    async with await open_store(own_database) as store:
        return (await TokenManager(store.db).create(user_id, name="outage")).token


@pytest.fixture
def proxy(own_database: str) -> Iterator[DatabaseProxy]:
    with database_proxy(own_database) as p:
        yield p


@pytest.fixture
def server(proxy: DatabaseProxy, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port, log = free_port(), tmp_path / "mcp.log"
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [str(Path(sys.executable).parent / "agent-memory"), "mcp", "--http", f"127.0.0.1:{port}"]
    env = {**os.environ, "AGENT_MEMORY_DATABASE_URL": proxy.url}

    def answers() -> bool:
        return httpx.post(url, json=INITIALIZE, headers=ACCEPT, timeout=2).status_code == 401

    with running_server(argv, env, log, answers, name="MCP HTTP server"):
        yield url, log


def initialize(url: str, token: str) -> httpx.Response:
    return httpx.post(url, json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {token}"}, timeout=30)


def test_requests_during_an_outage_get_503_with_what_happened(
    server: tuple[str, Path], proxy: DatabaseProxy, token: str
) -> None:
    url, _log = server
    assert initialize(url, token).status_code == 200
    proxy.cut()
    answer = initialize(url, token)
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "5"
    assert answer.json()["error"] == "database_unavailable"
    assert "database is unreachable" in answer.json()["error_description"]


def test_an_outage_is_logged_once_not_per_request(server: tuple[str, Path], proxy: DatabaseProxy, token: str) -> None:
    url, log = server
    assert initialize(url, token).status_code == 200
    proxy.cut()
    assert {initialize(url, token).status_code for _ in range(30)} == {503}
    text = log.read_text(errors="replace")
    assert text.count("database is unreachable") == 1
    assert "Traceback" not in text


def test_the_server_serves_again_when_the_database_is_back(
    server: tuple[str, Path], proxy: DatabaseProxy, token: str
) -> None:
    url, log = server
    proxy.cut()
    assert initialize(url, token).status_code == 503
    proxy.restore()
    assert initialize(url, token).status_code == 200
    assert "answers again" in log.read_text(errors="replace")
