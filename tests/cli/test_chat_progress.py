"""``agent-memory chat`` while code runs: progress on a terminal, in logs and as JSON events."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

from support.scripted_llm import ScriptedLLM, chat_env

from agent_memory.agents import CodeProgressEvent
from agent_memory.cli._chat import ProgressPrinter


def progress(elapsed_s: float, tail: str = "", output_bytes: int = 0) -> CodeProgressEvent:
    return CodeProgressEvent(
        source="executor", elapsed_s=elapsed_s, output_bytes=output_bytes, tail=tail, languages=["bash"]
    )


def test_on_a_terminal_one_line_is_rewritten_in_place_and_cleared() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(out, tty=True)

    printer.show(progress(0.5, "step 1\n", 7))
    printer.show(progress(1.0, "step 1\nstep 2\n", 14))
    printer.clear()

    assert out.getvalue() == (
        "\r\x1b[K[running bash 0 s, 7 bytes] step 1\r\x1b[K[running bash 1 s, 14 bytes] step 2\r\x1b[K"
    )


def test_piped_output_gets_a_line_after_five_seconds_then_every_ten() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(out, tty=False)

    for tenth in range(5, 260, 5):  # 0.5 s .. 25.5 s, as the executor sends them
        printer.show(progress(tenth / 10, f"line {tenth}\n"))

    assert [line.split("]")[0] for line in out.getvalue().splitlines()] == [
        "[running bash 5 s, 0 bytes",
        "[running bash 15 s, 0 bytes",
        "[running bash 25 s, 0 bytes",
    ]


def test_a_block_that_ends_quickly_leaves_nothing_in_piped_output() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(out, tty=False)
    printer.show(progress(0.5))
    printer.clear()
    assert out.getvalue() == ""


async def test_json_mode_streams_progress_events_while_code_runs(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path, user_id: str
) -> None:
    waiting = "echo step 1 of 2\nfor i in $(seq 1200); do [ -e go ] && break; sleep 0.05; done\necho step 2 of 2"
    scripted_llm.add(f"```bash\n{waiting}\n```", "Both steps ran. TERMINATE")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent_memory.cli", "chat", "--user", user_id, "--json", "-m", "run both steps",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=chat_env(scripted_llm, database_url, tmp_path),
    )  # fmt: skip
    assert proc.stdout is not None
    events = []
    try:
        async with asyncio.timeout(120):
            while line := await proc.stdout.readline():
                event = json.loads(line)
                events.append(event)
                if event.get("type") == "CodeProgressEvent" and "step 1 of 2" in event["tail"]:
                    for work_dir in (tmp_path / "work").glob("*/*"):
                        (work_dir / "go").touch()  # the code ends only once its progress was seen
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()

    assert proc.returncode == 0
    seen = [e for e in events if e.get("type") == "CodeProgressEvent"]
    assert seen and seen[0]["source"] == "executor" and seen[0]["languages"] == ["bash"]
    assert any("step 2 of 2" in str(e.get("content", "")) for e in events)
