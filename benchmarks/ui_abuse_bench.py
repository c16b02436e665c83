"""One client flooding the chat UI's login does not slow another user down (issue 13).

Starts `agent-memory ui` on a throwaway embedded database, logs a victim in, then measures the victim's requests
(`GET /memory-api/memories` with their session, and a fresh password login) twice in the same run:
- baseline: nobody else is on the server;
- under a login flood: a client at another address posts wrong passwords as fast as it can, 8 at a time.
Without throttling every attempt costs a scrypt hash on the server's CPU; with it, the flood is answered 429
after the address's allowance, without hashing, and a second late (a tarpit), so each flooding connection gets
one answer a second.

    python benchmarks/ui_abuse_bench.py            # prints the table
    python benchmarks/ui_abuse_bench.py --write    # and writes it into benchmarks/RESULTS.md
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
from pathlib import Path

import httpx
from _common import machine, percentile, publish, throwaway_database_url

VICTIM, PASSWORD = "victim", "victim-secret-password"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_ui(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "agent_memory.cli", "ui", "--port", str(port)]
    return subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


async def wait_healthy(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=5) as client:
        for _ in range(600):
            try:
                if (await client.get("/login")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("the UI did not start")


async def victim_round(base: str, cookies: httpx.Cookies, rounds: int) -> tuple[list[float], list[float]]:
    reads: list[float] = []
    logins: list[float] = []
    async with httpx.AsyncClient(base_url=base, timeout=60, cookies=cookies) as client:
        for _ in range(rounds):
            started = time.perf_counter()
            assert (await client.get("/memory-api/memories")).status_code == 200
            reads.append(time.perf_counter() - started)
            async with httpx.AsyncClient(base_url=base, timeout=60) as fresh:
                started = time.perf_counter()
                response = await fresh.post("/login", data={"username": VICTIM, "password": PASSWORD})
                assert response.status_code == 200, response.text
                logins.append(time.perf_counter() - started)
    return reads, logins


async def flood(base: str, stop: asyncio.Event, answers: Counter[int]) -> None:
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.7")
    async with httpx.AsyncClient(base_url=base, timeout=60, transport=transport) as client:
        i = 0
        while not stop.is_set():
            i += 1
            response = await client.post("/login", data={"username": f"guess-{i % 50}", "password": "x" * 12})
            answers[response.status_code] += 1


async def main(rounds: int, write: bool) -> None:
    home = Path(tempfile.mkdtemp(prefix="am-ui-bench-"))
    url = await throwaway_database_url(os.environ.get("AGENT_MEMORY_BENCH_DATABASE_URL"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_MEMORY_MODEL"))}
    env.update(AGENT_MEMORY_DATABASE_URL=url, AGENT_MEMORY_HOME=str(home))
    add = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "agent_memory.cli", "user", "add", VICTIM, "--password-stdin"],
        input=PASSWORD + "\n", text=True, env=env, capture_output=True, check=False,
    )  # fmt: skip
    if add.returncode != 0:
        raise SystemExit(add.stderr)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_ui(env, port, home / "ui.log")
    try:
        await wait_healthy(base)
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            assert (await client.post("/login", data={"username": VICTIM, "password": PASSWORD})).status_code == 200
            cookies = client.cookies
        await victim_round(base, cookies, 5)  # warm-up
        base_reads, base_logins = await victim_round(base, cookies, rounds)
        stop, answers = asyncio.Event(), Counter[int]()
        flooders = [asyncio.create_task(flood(base, stop, answers)) for _ in range(8)]
        await asyncio.sleep(1.0)  # the flood is under way before measuring
        flood_reads, flood_logins = await victim_round(base, cookies, rounds)
        stop.set()
        await asyncio.gather(*flooders)
    finally:
        server.terminate()
        server.wait(30)

    def row(name: str, before: list[float], during: list[float]) -> str:
        b95, d95 = percentile(before, 95) * 1000, percentile(during, 95) * 1000
        return (
            f"| {name} | {percentile(before, 50) * 1000:.1f} / {b95:.1f} | "
            f"{percentile(during, 50) * 1000:.1f} / {d95:.1f} | {d95 / b95:.2f}x |"
        )

    lines = [
        "## The UI under a login flood (issue 13) — `benchmarks/ui_abuse_bench.py`",
        "",
        f"Command: `python benchmarks/ui_abuse_bench.py --rounds {rounds} --write`; {machine()}; load average at "
        f"start {os.getloadavg()[0]:.1f}. One `agent-memory ui` process; the victim's {rounds} requests of each "
        "kind, first alone, then while 8 concurrent clients at another address post wrong passwords.",
        "",
        "| victim's request | alone p50 / p95 ms | during the flood p50 / p95 ms | p95 ratio |",
        "|---|---:|---:|---:|",
        row("read memories (session cookie)", base_reads, flood_reads),
        row("password login", base_logins, flood_logins),
        "",
        f"The flood's answers: {dict(sorted(answers.items()))} (429: refused by the throttle without hashing, after "
        "the one-second tarpit; without the tarpit the same flood got ~5,400 instant 429s and the victim's read p95 "
        "rose 2.7x). "
        "Goal: the victim's p95 at most 2x its baseline.",
    ]
    publish("ui-abuse", lines, write=write)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--write", action="store_true", help="write the section into benchmarks/RESULTS.md")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.write))
