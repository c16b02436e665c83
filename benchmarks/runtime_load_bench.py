"""Load on the distributed runtime: a host, two executor workers and the chat side as separate processes.

``agent-memory runtime host`` and two ``agent-memory runtime worker`` processes (shards 0 and 1, each with its own
home) are started; this process is the chat side (what ``agent-memory chat --runtime`` or the UI does): it runs
``--sessions`` concurrent sessions, one user each, through :class:`~agent_memory.agents.AgentBuilder` with
``executor_runtime=`` the gRPC client, against a local scripted OpenAI-compatible model. Each session's turn asks
for code that prints a big output (``--lines`` lines, ~25 bytes each) holding the session's own token; the
executor stores it in memory and leaves a placeholder.

Checked after each phase, for every session:

* completed: the turn ended with a placeholder whose stored content equals the expected output byte for byte
  (nothing lost);
* zero cross-user results: a search for every other session's token, as this user, returns none of their
  memories, and retrieving another user's key fails like a missing key;
* with ``--kill``: the worker of shard 1 is killed (SIGKILL) while the runs are under way: its sessions must fail
  with a clear error (no executor worker answers / the run was lost), the other shard's sessions finish.

    python benchmarks/runtime_load_bench.py                      # 50 sessions, then 50 with a worker killed
    python benchmarks/runtime_load_bench.py --sessions 100 --write
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import machine, percentile, publish, throwaway_database_url
from support.scripted_llm import RecordedRequest, ScriptedLLM
from support.servers import free_port

from agent_memory import MemoryNotFound, MemoryStore
from agent_memory.agents import AgentBuilder, connect_executor_runtime, shard_of
from agent_memory.config import Settings
from agent_memory.placeholders import parse_memory_refs

CLI = [sys.executable, "-m", "agent_memory.cli"]
_TOKEN = re.compile(r"token (tok[0-9a-f]+)")


def expected_output(token: str, lines: int) -> str:
    return "".join(f"{token} line {n} of the build log\n" for n in range(1, lines + 1))


def responder(lines: int, pause_s: float) -> Any:
    """The scripted model: code for a session's first request, TERMINATE once the executor answered."""

    def reply(request: RecordedRequest) -> str:
        contents = request.contents()
        if any("MemoryRef" in c or "exit code" in c.lower() for c in contents[1:]):
            return "The build log is stored. TERMINATE"
        token = next(m.group(1) for c in contents if (m := _TOKEN.search(c)))
        pause = f"time.sleep({pause_s})\n" if pause_s else ""
        half, line = lines // 2 + 1, f"    print(f'{token} line {{n}} of the build log')\n"
        return (f"```python\nimport sys, time\nfor n in range(1, {half}):\n{line}sys.stdout.flush()\n{pause}"
                f"for n in range({half}, {lines + 1}):\n{line}```")  # fmt: skip

    return reply


async def wait_for_line(proc: asyncio.subprocess.Process, text: str, limit_s: float = 60) -> None:
    assert proc.stdout is not None
    async with asyncio.timeout(limit_s):
        while line := (await proc.stdout.readline()).decode():
            if text in line:
                return
    raise RuntimeError(f"the process exited before printing {text!r}")


class Deployment:
    """``runtime host`` and two ``runtime worker`` processes on localhost."""

    def __init__(self, base: Path) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        self.base = base
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self) -> None:
        host = await asyncio.create_subprocess_exec(*CLI, "runtime", "host", "--listen", self.address,
                                                    stdout=subprocess.PIPE)  # fmt: skip
        self.procs.append(host)
        await wait_for_line(host, "listening")
        for shard in (0, 1):
            env = {**os.environ, "AGENT_MEMORY_HOME": str(self.base / f"worker-{shard}")}
            worker = await asyncio.create_subprocess_exec(
                *CLI, "runtime", "worker", "--connect", self.address, "--shard", str(shard), "--shards", "2",
                env=env, stdout=subprocess.PIPE,
            )  # fmt: skip
            self.procs.append(worker)
            await wait_for_line(worker, "connected")

    def kill_worker(self, shard: int) -> None:
        self.procs[1 + shard].send_signal(signal.SIGKILL)

    async def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()


async def one_session(store: MemoryStore, runtime: Any, llm: ScriptedLLM, user: str, token: str,
                      home: Path) -> dict[str, Any]:  # fmt: skip
    builder = AgentBuilder(store, user, model_client=llm.model_client(), home=home, executor_runtime=runtime,
                           executor_shards=2)  # fmt: skip
    session = await builder.build()
    started = time.perf_counter()
    outcome: dict[str, Any] = {"user": user, "token": token, "shard": shard_of(user, 2)}
    try:
        result = await session.run(f"Build the project and keep the log. Session token {token}.")
        report = "\n".join(m.to_text() for m in result.messages if m.source == "executor" and m.type == "TextMessage")
        refs = parse_memory_refs(report)
        outcome["key"] = refs[0].key if refs else None
        outcome["report"] = report
    except Exception as exc:
        outcome["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        outcome["seconds"] = time.perf_counter() - started
        await session.close()
    return outcome


async def check(store: MemoryStore, outcomes: list[dict[str, Any]], lines: int) -> dict[str, int]:
    """Completed with the exact output, cross-user results (must be 0) and lost outputs (must be 0)."""
    completed = lost = cross = 0
    keys = {o["user"]: o.get("key") for o in outcomes}
    for o in outcomes:
        if o.get("key"):
            stored = await store.retrieve(o["key"], user_id=o["user"])
            if stored == expected_output(o["token"], lines):
                completed += 1
            else:
                lost += 1
    for o in outcomes:
        own = {keys[o["user"]]}
        for other in outcomes:
            if other is o:
                continue
            hits = await store.search(other["token"], user_id=o["user"], limit=5, min_score=0.0)
            cross += sum(1 for h in hits if h.memory_key not in own)
        other_key = next((k for u, k in keys.items() if u != o["user"] and k), None)
        if other_key is not None:
            try:
                await store.retrieve(other_key, user_id=o["user"])
                cross += 1
            except MemoryNotFound:
                pass
    return {"completed": completed, "lost": lost, "cross": cross}


async def phase(store: MemoryStore, deployment: Deployment, llm: ScriptedLLM, base: Path, sessions: int,
                lines: int, kill_mid_run: bool, tag: str) -> dict[str, Any]:  # fmt: skip
    runtime = await connect_executor_runtime(deployment.address)
    users = [f"load-{tag}-{i:03d}" for i in range(sessions)]
    tokens = [f"tok{os.urandom(6).hex()}" for _ in users]
    started = time.perf_counter()
    tasks = [
        asyncio.ensure_future(one_session(store, runtime, llm, u, t, base / "chat"))
        for u, t in zip(users, tokens, strict=True)
    ]
    if kill_mid_run:  # once half of shard 1's runs have started on its worker (their work directories exist)
        on_shard_1 = sum(1 for u in users if shard_of(u, 2) == 1)
        begun = lambda: len(list((deployment.base / "worker-1").glob("work/*/*")))  # noqa: E731
        while begun() < max(on_shard_1 // 2, 1):  # noqa: ASYNC110 (a directory appearing is no event to await)
            await asyncio.sleep(0.05)
        deployment.kill_worker(1)
    outcomes = list(await asyncio.gather(*tasks))
    wall = time.perf_counter() - started
    await runtime.stop()
    checked = await check(store, outcomes, lines)
    failed = [o for o in outcomes if "error" in o or not o.get("key")]
    clear = [o for o in failed if re.search(r"no executor worker answers|the run was lost|failed the run",
                                             o.get("error", "") + o.get("report", ""))]  # fmt: skip
    ok_seconds = [o["seconds"] for o in outcomes if o.get("key")]
    return {
        "sessions": sessions, "wall": wall, **checked, "failed": len(failed), "failed_clearly": len(clear),
        "failed_shards": sorted({o["shard"] for o in failed}),
        "lost_mid_run": sum(1 for o in failed if "the run was lost" in o.get("error", "")),
        "p50": percentile(ok_seconds, 50) * 1000 if ok_seconds else 0.0,
        "p95": percentile(ok_seconds, 95) * 1000 if ok_seconds else 0.0,
        "shard1": sum(1 for o in outcomes if o["shard"] == 1),
        "sample_error": next((o.get("error") or o.get("report", "")[:200] for o in failed), ""),
    }  # fmt: skip


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--lines", type=int, default=4000, help="lines of output per run (~25 bytes each)")
    ap.add_argument("--pause", type=float, default=2.0, help="seconds each run pauses halfway (runs overlap)")
    ap.add_argument("--url")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    url = await throwaway_database_url(args.url)
    base = Path(tempfile.mkdtemp(prefix="agent-memory-load-"))
    llm = ScriptedLLM([responder(args.lines, args.pause)] * (args.sessions * 8)).start()
    os.environ.update({"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "scripted", "AGENT_MEMORY_MODEL": "gpt-4o"})
    store = await MemoryStore.open(url, settings=Settings(database_url=url, embedder="none"))
    results: dict[str, dict[str, Any]] = {}
    try:
        for name, kill in (("all workers up", False), ("worker of shard 1 killed mid-run", True)):
            deployment = Deployment(base / name.replace(" ", "-"))
            await deployment.start()
            try:
                print(f"{name}: {args.sessions} sessions ...", file=sys.stderr)
                results[name] = await phase(store, deployment, llm, base, args.sessions, args.lines,
                                            kill, "kill" if kill else "up")  # fmt: skip
            finally:
                await deployment.stop()
    finally:
        await store.close()
        llm.stop()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,  # noqa: ASYNC221
                            check=False).stdout.strip()  # fmt: skip
    out = [
        "## Distributed runtime under load (issue 15) — `benchmarks/runtime_load_bench.py`",
        "",
        f"`python benchmarks/runtime_load_bench.py{' --write' if args.write else ''}` (sessions {args.sessions}, "
        f"{args.lines} lines of output per run, a {args.pause:.0f} s pause halfway), commit {commit}, "
        f"{time.strftime('%Y-%m-%d')}, {machine()}. Separate processes: `runtime host`, two `runtime worker` "
        "(shards 0 and 1), and this process as the chat side (one user per session, concurrent turns, scripted "
        "local model). Turn latency: one user message to TERMINATE, code run on a worker, output stored.",
        "",
        "| phase | sessions | completed (exact output) | failed | failed with a clear error | lost | cross-user "
        "results | p50 turn ms | p95 turn ms | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        out.append(f"| {name} | {r['sessions']} | {r['completed']} | {r['failed']} | {r['failed_clearly']} | "
                   f"{r['lost']} | {r['cross']} | {r['p50']:.0f} | {r['p95']:.0f} | {r['wall']:.1f} |")  # fmt: skip
    killed = results.get("worker of shard 1 killed mid-run")
    if killed:
        out += ["", f"With the worker killed (SIGKILL once half of its runs had started): {killed['shard1']} sessions "
                    f"belonged to shard 1; failed sessions were on shards {killed['failed_shards']}; "
                    f"{killed['lost_mid_run']} of them were killed while running (\"the run was lost\"), the others "
                    f"were refused before running (\"the code was not run\"). One error: "
                    f"`{killed['sample_error'][:170]}`"]  # fmt: skip
    out += [
        "",
        "How it grows: executor workers are independent (a user's shard is `sha256(user) % shards`, their files "
        "live with their worker), so more machines means more shards, each with its own `runtime worker`; "
        "resharding moves the work directories of the users whose shard changed (memories are in PostgreSQL "
        "and move with nothing). The chat side scales by running more UI processes behind a load balancer with "
        "sticky sessions; they share PostgreSQL (through PgBouncer in transaction mode when connections run "
        "short). The single host process routes every message: it is the next limit, and AutoGen's host is "
        "one process (no replication), so a host restart fails the runs in flight.",
    ]
    publish("runtime_load", out, write=args.write)


if __name__ == "__main__":
    asyncio.run(main())
