"""Live progress: while code runs, the executor streams its elapsed time and the tail of its output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autogen_agentchat.base import Response
from autogen_agentchat.messages import TextMessage
from autogen_core import CancellationToken
from support.processes import marker_seconds, processes_with
from support.scripted_llm import ScriptedLLM

from agent_memory import MemoryStore
from agent_memory.agents import AgentBuilder, CodeProgressEvent, ExecutorAgent, LocalProcessGroupExecutor
from agent_memory.agents._progress import OutputTail

# Prints a line, then waits (at most 60 s) for the test to create `go` in the work directory, then prints "done".
WAITING_CODE = (
    "```python\nimport os, time\nprint('step 1 of 2', flush=True)\nend = time.time() + 60\n"
    "while not os.path.exists('go') and time.time() < end:\n    time.sleep(0.02)\nprint('done')\n```"
)


async def test_running_code_streams_its_output_tail_and_time_before_the_result(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    agent = ExecutorAgent("executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=store, user_id=user_id)
    stream = agent.on_messages_stream([TextMessage(content=WAITING_CODE, source="coder")], CancellationToken())
    seen: list[Any] = []
    async for item in stream:
        seen.append(item)
        if isinstance(item, CodeProgressEvent) and "step 1 of 2" in item.tail:
            (tmp_path / "go").touch()  # the code ends only once its first line was seen live

    progress = [i for i in seen if isinstance(i, CodeProgressEvent)]
    assert progress, "no progress while the code ran"
    assert progress[-1].output_bytes >= len("step 1 of 2\n")
    assert progress[-1].languages == ["python"]
    assert [p.elapsed_s for p in progress] == sorted(p.elapsed_s for p in progress)
    assert isinstance(seen[-1], Response)
    assert "done" in seen[-1].chat_message.to_text()
    assert seen.index(progress[0]) < len(seen) - 1


async def test_code_that_finishes_at_once_yields_no_progress(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    agent = ExecutorAgent("executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=store, user_id=user_id)

    seen = [
        item
        async for item in agent.on_messages_stream(
            [TextMessage(content="```bash\necho quick\n```", source="coder")], CancellationToken()
        )
    ]

    assert not any(isinstance(i, CodeProgressEvent) for i in seen)


async def test_closing_the_stream_while_code_runs_ends_the_run(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    marker = marker_seconds()
    code = f"```bash\necho step 1 of 2\nsleep {marker}\n```"
    agent = ExecutorAgent("executor", LocalProcessGroupExecutor(work_dir=tmp_path), store=store, user_id=user_id)
    stream = agent.on_messages_stream([TextMessage(content=code, source="coder")], CancellationToken())

    async for item in stream:
        if isinstance(item, CodeProgressEvent) and "step 1 of 2" in item.tail:
            break
    assert processes_with(marker), "the run should be under way"
    await stream.aclose()  # what a UI's Stop or a closed websocket does

    assert processes_with(marker) == []


async def test_a_team_run_streams_progress_events_of_the_executor(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    scripted_llm.add(WAITING_CODE)
    scripted_llm.add("It printed done. TERMINATE")
    session = await AgentBuilder(store, user_id, model_client=scripted_llm.model_client()).build()
    work_dir = Path(session.code_executor.work_dir)  # type: ignore[attr-defined]
    progress: list[CodeProgressEvent] = []
    try:
        async for item in session.run_stream("Run the two steps."):
            if isinstance(item, CodeProgressEvent):
                progress.append(item)
                if "step 1 of 2" in item.tail:
                    (work_dir / "go").touch()
    finally:
        await session.close()

    assert progress and progress[0].source == "executor"


def test_the_tail_keeps_the_last_lines_and_the_last_state_of_a_progress_bar() -> None:
    tail = OutputTail(max_lines=3)
    for n in range(10):
        tail.feed(f"line {n}\n".encode())
    tail.feed(b"downloading 10%\rdownloading 55%\rdownloading 90%")

    assert tail.text() == "line 8\nline 9\ndownloading 90%"
    assert tail.total == 10 * len(b"line 0\n") + len(b"downloading 10%\rdownloading 55%\rdownloading 90%")


def test_the_tail_of_a_huge_output_is_bounded_and_survives_a_split_utf8_character() -> None:
    tail = OutputTail(max_lines=5)
    tail.feed(("é" * 100_000).encode()[:-1])  # ends inside a two-byte character

    text = tail.text()
    assert len(text) <= 4000
    assert text.endswith("\ufffd")
    assert tail.total == 200_000 - 1
