"""One user attacking the shared MCP HTTP server does not slow another user down (issue 13).

Starts `agent-memory mcp --http` on a throwaway embedded database with two users' tokens, then measures the
victim's `retrieve_memory` calls (one session, a small memory, grep for a word) three times in the same run:
- baseline: nobody else is on the server;
- under regex bombs: the attacker's 4 sessions call `retrieve_memory` with grep `(a|aa)+$` on a line of 40 'a's
  and a 'b' (Python's re needs hours for it; here each call is stopped at AGENT_MEMORY_GREP_TIMEOUT_SECONDS);
- under a session flood: 8 attacker clients open sessions as fast as they can (capped per user, 429 after that).

    python benchmarks/mcp_abuse_bench.py            # prints the table
    python benchmarks/mcp_abuse_bench.py --write    # and writes it into benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from _common import machine, percentile, publish, throwaway_database_url
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}},
}
BOMB_LINE = "a" * 40 + "b"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "agent_memory.cli", "mcp", "--http", f"127.0.0.1:{port}"]
    return subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


async def wait_listening(url: str) -> None:
    async with httpx.AsyncClient(timeout=2) as client:
        for _ in range(600):
            try:
                if (await client.post(url, json=INITIALIZE, headers=ACCEPT)).status_code == 401:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("the MCP server did not start")


async def tokens_and_keys(url: str) -> tuple[str, str, str, str]:
    from agent_memory import MemoryStore
    from agent_memory.auth import TokenManager

    async with await MemoryStore.open(url) as store:
        tokens = TokenManager(store.db)
        victim = (await tokens.create("victim", name="bench")).token
        attacker = (await tokens.create("attacker", name="bench")).token
        victim_key = await store.store("build ok\nfirst warning here\n" * 50, user_id="victim")
        bomb_key = await store.store(BOMB_LINE, user_id="attacker")
    return victim, attacker, victim_key, bomb_key


@asynccontextmanager
async def session(url: str, token: str) -> AsyncIterator[ClientSession]:
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        client,
        streamable_http_client(url, http_client=client) as (read, write, _),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        yield s


async def victim_round(url: str, token: str, key: str, rounds: int) -> list[float]:
    samples: list[float] = []
    async with session(url, token) as s:
        for _ in range(rounds):
            started = time.perf_counter()
            result = await s.call_tool("retrieve_memory", {"key": key, "grep": "warning", "max_chars": 2000})
            samples.append(time.perf_counter() - started)
            assert not result.isError, result
    return samples


async def bomber(url: str, token: str, key: str, stop: asyncio.Event, answers: Counter[str]) -> None:
    async with session(url, token) as s:
        while not stop.is_set():
            result = await s.call_tool("retrieve_memory", {"key": key, "grep": r"(a|aa)+$"})
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            answers["too costly" if result.isError and "too costly" in text else "other"] += 1


async def session_flood(url: str, token: str, stop: asyncio.Event, answers: Counter[int]) -> None:
    headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60) as client:
        while not stop.is_set():
            answers[(await client.post(url, json=INITIALIZE, headers=headers)).status_code] += 1


async def under(load: list[asyncio.Task[None]], measure: asyncio.Future[list[float]]) -> list[float]:
    try:
        return await measure
    finally:
        for task in load:
            task.cancel()
        await asyncio.gather(*load, return_exceptions=True)


async def main(rounds: int, write: bool) -> None:
    home = Path(tempfile.mkdtemp(prefix="am-mcp-bench-"))
    db_url = await throwaway_database_url(os.environ.get("AGENT_MEMORY_BENCH_DATABASE_URL"))
    victim, attacker, victim_key, bomb_key = await tokens_and_keys(db_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(AGENT_MEMORY_DATABASE_URL=db_url, AGENT_MEMORY_HOME=str(home))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = start_server(env, port, home / "mcp.log")
    try:
        await wait_listening(url)
        await victim_round(url, victim, victim_key, 5)  # warm-up
        alone = await victim_round(url, victim, victim_key, rounds)

        stop, bombs = asyncio.Event(), Counter[str]()
        load = [asyncio.create_task(bomber(url, attacker, bomb_key, stop, bombs)) for _ in range(4)]
        await asyncio.sleep(1.0)  # the bombs are under way before measuring
        bombed = await under(load, asyncio.ensure_future(victim_round(url, victim, victim_key, rounds)))

        stop, opened = asyncio.Event(), Counter[int]()
        load = [asyncio.create_task(session_flood(url, attacker, stop, opened)) for _ in range(8)]
        await asyncio.sleep(1.0)
        flooded = await under(load, asyncio.ensure_future(victim_round(url, victim, victim_key, rounds)))
    finally:
        server.terminate()
        server.wait(30)

    base95 = percentile(alone, 95) * 1000

    def row(name: str, samples: list[float]) -> str:
        p95 = percentile(samples, 95) * 1000
        return f"| {name} | {percentile(samples, 50) * 1000:.1f} | {p95:.1f} | {p95 / base95:.2f}x |"

    lines = [
        "## The MCP server under one user's abuse (issue 13) — `benchmarks/mcp_abuse_bench.py`",
        "",
        f"Command: `python benchmarks/mcp_abuse_bench.py --rounds {rounds} --write`; {machine()}; load average at "
        f"start {os.getloadavg()[0]:.1f}. One `agent-memory mcp --http` process; the victim's {rounds} "
        "`retrieve_memory` calls (grep for a word in a 100-line memory) alone, while the attacker's 4 sessions send "
        "regex bombs, and while 8 attacker clients open sessions as fast as they can.",
        "",
        "| victim's calls | p50 ms | p95 ms | p95 vs alone |",
        "|---|---:|---:|---:|",
        row("alone", alone),
        row("during regex bombs", bombed),
        row("during a session flood", flooded),
        "",
        f"Regex bombs answered: {dict(bombs)} (each stopped after the 2 s limit; with Python's `re` one such call "
        f"held the server for hours). Session flood answers by status: {dict(sorted(opened.items()))} (200: a new "
        "session, up to the per-user cap of 20; 429: refused). Goal: the victim's p95 at most 2x alone.",
    ]
    publish("mcp-abuse", lines, write=write)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--write", action="store_true", help="write the section into benchmarks/RESULTS.md")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.write))
