"""Per-block cost of the bubblewrap sandbox against a plain subprocess, in the same process and run.

Ways to run the same block, in a random order each round so machine load and the teardown of the run before
hit them alike:
- ``plain``: ``asyncio.create_subprocess_exec`` of the program, nothing else (the baseline);
- ``executor, isolation none``: the executor without the sandbox (prlimit + allowlisted environment);
- ``executor, bubblewrap``: the executor as it runs by default (namespaces, mounts, limits; as root a uid switch);
- ``..., no disk guard``: the same without the disk guard (the baseline of its cost);
- ``..., user with 20,000 files``: the default, for a user whose work directories hold 20,000 files (a few
  virtual environments): the disk guard counts them after each block, in the background (the next block waits
  for that count if it is still under way), and each second while a block runs.
The overhead is the sandboxed executor's time minus the plain subprocess time, per block.

    python benchmarks/sandbox_bench.py            # prints the table
    python benchmarks/sandbox_bench.py --write    # and writes it into benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from _common import machine, percentile, publish
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock

from agent_memory.agents import LocalProcessGroupExecutor, SandboxPolicy, user_work_root
from agent_memory.agents._disk_guard import DiskGuard

MANY_FILES = 20_000

BLOCKS = {
    "echo hi (bash)": ("echo hi", "bash", ["bash", "-c", "echo hi"]),
    "short Python script": (
        "import json\nprint(json.dumps(sum(range(1000))))",
        "python",
        [sys.executable, "-c", "import json\nprint(json.dumps(sum(range(1000))))"],
    ),
}


class UnguardedExecutor(LocalProcessGroupExecutor):
    """The default executor without the disk guard."""

    def _disk_guard(self) -> DiskGuard | None:
        return None


async def plain(argv: list[str]) -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    await proc.communicate()
    return time.perf_counter() - started


async def through(executor: LocalProcessGroupExecutor, code: str, language: str) -> float:
    started = time.perf_counter()
    result = await executor.execute_code_blocks([CodeBlock(code, language)], CancellationToken())
    elapsed = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(f"block failed: {result.output}")
    return elapsed


async def main(rounds: int, write: bool) -> None:
    home = Path(tempfile.mkdtemp(prefix="am-sandbox-bench-"))
    sandboxed = LocalProcessGroupExecutor(timeout=30, work_dir=user_work_root(home, "u") / "t", owner="u", home=home)
    unisolated = LocalProcessGroupExecutor(
        timeout=30, work_dir=home / "work" / "n" / "t", home=home, sandbox=SandboxPolicy(isolation="none")
    )
    unguarded = UnguardedExecutor(timeout=30, work_dir=user_work_root(home, "g") / "t", owner="g", home=home)
    crowded = LocalProcessGroupExecutor(timeout=30, work_dir=user_work_root(home, "c") / "t", owner="c", home=home)
    for n in range(MANY_FILES // 100):
        folder = user_work_root(home, "c") / f"venv{n}"
        folder.mkdir(parents=True)
        for m in range(99):
            (folder / f"f{m}.py").write_text("x = 1\n")
    lines = [
        "## Sandbox overhead per code block (issue 12) — `benchmarks/sandbox_bench.py`",
        "",
        f"Command: `python benchmarks/sandbox_bench.py --rounds {rounds} --write`; {machine()}; "
        f"running as {'root (per-user uid switch)' if os.geteuid() == 0 else 'a normal user (user namespace)'}; "
        f"{rounds} rounds, the ways in a random order each round; load average at start {os.getloadavg()[0]:.1f} "
        "(other jobs on the machine). Milliseconds per block.",
        "",
        "| block | way | p50 | p95 | overhead vs plain, p50 / p95 |",
        "|---|---|---:|---:|---:|",
    ]
    for name, (code, language, argv) in BLOCKS.items():
        samples: dict[str, list[float]] = {
            "plain subprocess": [],
            "executor, isolation none": [],
            "executor, bubblewrap": [],
            "executor, bubblewrap, no disk guard": [],
            f"executor, bubblewrap, user with {MANY_FILES:,} files": [],
        }
        for first in (sandboxed, unguarded, crowded):  # first run records the uid and makes the work dir
            await through(first, code, language)
        ways: dict[str, LocalProcessGroupExecutor | None] = {  # None: the plain subprocess
            "plain subprocess": None,
            "executor, isolation none": unisolated,
            "executor, bubblewrap": sandboxed,
            "executor, bubblewrap, no disk guard": unguarded,
            f"executor, bubblewrap, user with {MANY_FILES:,} files": crowded,
        }
        for _ in range(rounds):
            # A run slows the one after it (its sandbox is still being torn down): a fresh order each round.
            for way in random.sample(list(ways), len(ways)):
                executor = ways[way]
                took = await plain(argv) if executor is None else await through(executor, code, language)
                samples[way].append(took)
        base50 = percentile(samples["plain subprocess"], 50) * 1000
        base95 = percentile(samples["plain subprocess"], 95) * 1000
        for way, values in samples.items():
            p50, p95 = percentile(values, 50) * 1000, percentile(values, 95) * 1000
            overhead = "" if way == "plain subprocess" else f"+{p50 - base50:.1f} / +{p95 - base95:.1f}"
            lines.append(f"| {name} | {way} | {p50:.1f} | {p95:.1f} | {overhead} |")
    lines += [
        "",
        "Goal: under 50 ms of overhead per block. What the sandbox adds: `prlimit`, bubblewrap's namespaces and "
        "mounts (a fresh `/proc` and `/tmp` each time), `setpriv` as root, the memfd holding the code, and the disk "
        "guard (`statvfs` every 50 ms while a block runs; a `find` over the user's files after each block, in the "
        "background, which the next block waits for if it is still under way). The executor notices the end of a "
        "run through a pidfd (it polled before: 5, 15, 35, 75 ms... after the start, which cost up to ~20 ms on a "
        "short block).",
    ]
    publish("sandbox", lines, write=write)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--write", action="store_true", help="write the section into benchmarks/RESULTS.md")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.write))
