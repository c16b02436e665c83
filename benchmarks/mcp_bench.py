"""MCP server: tool-call latency per transport, and how many tokens a tool result puts in a context.

Transports: in-process client session (mcp.shared.memory), `agent-memory mcp --user` over stdio, and
`agent-memory mcp --http` with a bearer token (each HTTP request re-verifies the token in PostgreSQL).
Data: one 30,000-line command output with one planted fact (1.4 MB, about 660k tokens), plus 200 small notes.

    python benchmarks/mcp_bench.py                 # fresh embedded PostgreSQL, writes RESULTS.md
    python benchmarks/mcp_bench.py --url postgresql://...  --no-write --calls 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from _common import machine, summary_ms, throwaway_database_url, write_section
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import TextContent

from agent_memory import MemoryStore
from agent_memory.auth import TokenManager
from agent_memory.config import Settings
from agent_memory.mcp import create_server
from agent_memory.tokens import count_tokens

USER = "bench-user"
CLI = str(Path(sys.executable).parent / "agent-memory")


def big_log() -> str:
    lines = [f"2026-11-22T07:{i // 600 % 60:02d}:{i % 60:02d} INFO worker-{i % 17} step {i} ok" for i in range(30_000)]
    lines[17_345] = "2026-11-22T07:28:55 FATAL worker-5 token XK-4471 expired; rotate with vault kv put"
    return "\n".join(lines) + "\n"


async def time_calls(session: ClientSession, calls: int, key: str) -> dict[str, list[float]]:
    plan: dict[str, tuple[str, dict[str, Any]]] = {
        "memory_stats": ("memory_stats", {}),
        "retrieve grep (30k lines)": ("retrieve_memory", {"key": key, "grep": "FATAL", "context": 2}),
        "search_memory": ("search_memory", {"query": "token expired rotate vault"}),
    }
    out: dict[str, list[float]] = {name: [] for name in plan}
    for name, (tool, args) in plan.items():
        await session.call_tool(tool, args)  # warm-up
        for _ in range(calls):
            start = time.perf_counter()
            result = await session.call_tool(tool, args)
            out[name].append(time.perf_counter() - start)
            assert not result.isError, result.content
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(url: str, calls: int) -> str:
    os.environ["AGENT_MEMORY_DATABASE_URL"] = url
    store = await MemoryStore.open(url, settings=Settings(database_url=url))
    try:
        if await store.stats(user_id=USER):
            await store.forget_user(USER)
        content = big_log()
        key = await store.store(content, user_id=USER, description="worker run log", memory_type="command_output")
        for i in range(200):
            await store.store(f"note {i}: setting {i} is {i * 7}", user_id=USER, description=f"note {i}")
        token = (await TokenManager(store.db).create(USER, name="bench")).token

        results: dict[str, dict[str, list[float]]] = {}
        sizes: list[tuple[str, int, int]] = [
            ("raw content (what offloading keeps out)", len(content), count_tokens(content))
        ]

        async with create_connected_server_and_client_session(create_server(store, user_id=USER)) as session:
            results["in-process"] = await time_calls(session, calls, key)
            for label, args in [
                ("retrieve_memory(key) — capped", {"key": key}),
                ("retrieve_memory(key, grep='FATAL', context=2)", {"key": key, "grep": "FATAL", "context": 2}),
                ("retrieve_memory(key, lines='17340-17350')", {"key": key, "lines": "17340-17350"}),
            ]:
                result = await session.call_tool("retrieve_memory", args)
                block = result.content[0]
                assert isinstance(block, TextContent)
                sizes.append((label, len(block.text), count_tokens(block.text)))

        params = StdioServerParameters(command=CLI, args=["mcp", "--user", USER], env=dict(os.environ))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            results["stdio subprocess"] = await time_calls(session, calls, key)

        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            CLI, "mcp", "--http", f"127.0.0.1:{port}", env=dict(os.environ), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        endpoint = f"http://127.0.0.1:{port}/mcp"
        try:
            deadline = time.monotonic() + 60
            async with httpx.AsyncClient() as probe:
                while True:  # until the server answers (401 without a token)
                    try:
                        await probe.get(endpoint, timeout=1)
                        break
                    except httpx.TransportError:
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.1)
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                create_mcp_http_client(headers=headers) as http,
                streamable_http_client(endpoint, http_client=http) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                results["streamable HTTP + bearer token"] = await time_calls(session, calls, key)
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), timeout=20)
    finally:
        await store.forget_user(USER)
        await store.close()

    rows = [
        f"| {transport} | {name} | {summary_ms(samples)} |"
        for transport, per_tool in results.items()
        for name, samples in per_tool.items()
    ]
    size_rows = [f"| {label} | {chars:,} | {tokens:,} |" for label, chars, tokens in sizes]
    return "\n".join(
        [
            "## MCP server (benchmarks/mcp_bench.py)",
            "",
            f"Machine: {machine()}. {calls} calls per tool and transport after one warm-up; one user holding a",
            "30,000-line command output and 200 notes. Latency is client-observed wall clock per `call_tool`.",
            "",
            "| transport | tool call | p50 / p95 / mean (ms) |",
            "|---|---|---|",
            *rows,
            "",
            "What one tool result puts in a context (text content of the result, tiktoken o200k):",
            "",
            "| result | characters | tokens |",
            "|---|---|---|",
            *size_rows,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="PostgreSQL URL (default: a throwaway embedded server)")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--no-write", action="store_true", help="print only, do not update RESULTS.md")
    args = parser.parse_args()

    async def go() -> str:
        return await run(await throwaway_database_url(args.url), args.calls)

    body = asyncio.run(go())
    print(body)
    if not args.no_write:
        write_section("mcp", body)


if __name__ == "__main__":
    main()
