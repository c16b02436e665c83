"""How much one user's busy processes slow another user's code, with CPU shared per user and without.

As root, every run joins its user's CPU cgroup (``agent_memory/agents/_cgroups.py``), so users share the CPU
equally. The baseline puts every run in the one shared group (the per-user groups lifted, as before), where the
scheduler shares per thread. Same process, same machine, the two ways alternating round by round:

- ``mallory`` runs one block that starts ``--hogs`` busy processes (until the victim is done);
- ``alice`` runs a fixed CPU-bound Python block alone, then while mallory's hogs run.

    sudo python benchmarks/cpu_share_bench.py            # prints the table (needs root: cgroups, uids)
    sudo python benchmarks/cpu_share_bench.py --write    # and writes it into benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import machine, percentile, publish
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock

import agent_memory.agents._sandbox as sandbox
from agent_memory.agents import LocalProcessGroupExecutor, user_work_root
from agent_memory.agents._cgroups import RunCgroup, run_cgroup

VICTIM = "total = 0\nfor n in range(30_000_000):\n    total += n\nprint(total)\n"
HOGS = """
import multiprocessing, os, time
def burn():
    while not os.path.exists("stop"):
        for _ in range(100_000):
            pass
if __name__ == "__main__":
    for _ in range({hogs}):
        multiprocessing.Process(target=burn).start()
    open("started", "w").close()
    while not os.path.exists("stop"):
        time.sleep(0.1)
"""


def shared_group(memory_mb: int, max_processes: int, root: Path | None = None, uid: int | None = None) -> RunCgroup:
    """The baseline: every run in the one shared CPU group."""
    return run_cgroup(memory_mb, max_processes, root)


async def timed(executor: LocalProcessGroupExecutor) -> float:
    started = time.perf_counter()
    result = await executor.execute_code_blocks([CodeBlock(VICTIM, "python")], CancellationToken())
    if result.exit_code != 0:
        raise SystemExit(f"the victim's block failed: {result.output}")
    return time.perf_counter() - started


async def under_hogs(home: Path, alice: LocalProcessGroupExecutor, hogs: int) -> float:
    """Alice's time while mallory's hogs run: the hogs' block runs until a file tells them to stop."""
    mallory_dir = user_work_root(home, "mallory") / "t"
    mallory = LocalProcessGroupExecutor(timeout=120, work_dir=mallory_dir, owner="mallory", home=home)
    for flag in ("started", "stop"):
        (mallory_dir / flag).unlink(missing_ok=True)
    hog_code = HOGS.format(hogs=hogs)
    hog_run = asyncio.create_task(mallory.execute_code_blocks([CodeBlock(hog_code, "python")], CancellationToken()))
    for _ in range(1200):  # polled: the hogs' start is a file their sandbox writes
        if (mallory_dir / "started").exists() or hog_run.done():
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # the hogs are busy
    try:
        return await timed(alice)
    finally:
        (mallory_dir / "stop").touch()
        await hog_run


async def main(rounds: int, hogs: int, write: bool) -> None:
    if os.geteuid() != 0:
        raise SystemExit("run as root: CPU cgroups and per-user uids are made only then")
    load_at_start = os.getloadavg()[0]
    home = Path(tempfile.mkdtemp(prefix="am-cpu-bench-"))
    alice = LocalProcessGroupExecutor(
        timeout=120, work_dir=user_work_root(home, "alice") / "t", owner="alice", home=home
    )
    await timed(alice)  # records the uid, makes the work directory
    ways: dict[str, Any] = {"per-user CPU groups (shipped)": run_cgroup, "one shared group (baseline)": shared_group}
    samples: dict[str, list[float]] = {"alone": [], **{way: [] for way in ways}}
    for _ in range(rounds):
        samples["alone"].append(await timed(alice))
        for way, make in ways.items():
            sandbox.run_cgroup = make  # type: ignore[assignment]
            samples[way].append(await under_hogs(home, alice, hogs))
        sandbox.run_cgroup = run_cgroup  # type: ignore[assignment]
    alone = percentile(samples["alone"], 50)
    lines = [
        "## One user's busy processes against another user's code (CPU shares) — `benchmarks/cpu_share_bench.py`",
        "",
        f"Command: `python benchmarks/cpu_share_bench.py --rounds {rounds} --hogs {hogs} --write` (as root); "
        f"{machine()}; load average at start {load_at_start:.1f}. Alice's block (a 30-million-step Python "
        f"loop, sandbox included) alone, and while mallory's block runs {hogs} busy processes; the two ways "
        "alternate in each round, in one process.",
        "",
        "| alice's block | median s | slowdown |",
        "|---|---:|---:|",
    ]
    for way, values in samples.items():
        median = percentile(values, 50)
        lines.append(
            f"| {way if way == 'alone' else 'during the hogs, ' + way} | {median:.2f} | {median / alone:.1f}x |"
        )
    publish("cpu-share", lines, write=write)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=16)
    parser.add_argument("--write", action="store_true", help="write the section into benchmarks/RESULTS.md")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.hogs, args.write))
