"""End to end: the CodeAgent + executor team on a real PostgreSQL, real commands, and a scripted model
served over HTTP (the real openai client and AutoGen's OpenAIChatCompletionClient talk to it).

Every assertion about "what the model saw" is made on the request bodies the server recorded.
"""

from __future__ import annotations

import asyncio
import re
import threading
import uuid

import pytest
from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import TextMessage
from support.scripted_llm import RecordedRequest, Reply, ScriptedLLM

from agent_memory import MemoryNotFound, MemoryStore
from agent_memory.agents import CODE_AGENT_SYSTEM_MESSAGE, AgentBuilder, MemoryContextEvent, MemoryStoredEvent, TeamSpec
from agent_memory.placeholders import parse_memory_refs

N_LINES = 30_000
FACT_LINE = 17_123


def big_program(fact: str) -> str:
    """Python that prints N_LINES lines, one of which carries ``fact`` (spelled backwards in the code, so
    the fact itself reaches the model only if the output does)."""
    return (
        f"for i in range(1, {N_LINES + 1}):\n"
        f"    if i == {FACT_LINE}:\n"
        f"        print('config: DEPLOY_TOKEN=' + '{fact[::-1]}'[::-1])\n"
        "    else:\n"
        "        print(f'line {i:05d}: status ok checksum {i * 7919 % 100003:06d}')\n"
    )


def expected_output(fact: str) -> str:
    lines = []
    for i in range(1, N_LINES + 1):
        lines.append(
            f"config: DEPLOY_TOKEN={fact}"
            if i == FACT_LINE
            else f"line {i:05d}: status ok checksum {i * 7919 % 100003:06d}"
        )
    return "\n".join(lines) + "\n"


def last_ref_key(request: RecordedRequest) -> str:
    refs = [ref for text in request.contents() for ref in parse_memory_refs(text)]
    assert refs, "the model received no [MemoryRef: ...] placeholder"
    return refs[-1].key


def answer_from_tool_result(request: RecordedRequest) -> str:
    """The scripted model 'reads' the grep result it was sent and answers with what it found."""
    tool_messages = [m for m in request.messages if m.get("role") == "tool"]
    assert tool_messages, "no tool result was sent to the model"
    match = re.search(r"DEPLOY_TOKEN=([\w-]+)", str(tool_messages[-1]["content"]))
    found = match.group(1) if match else "NOT FOUND"
    return f"The planted deploy token is {found}. TERMINATE"


def script_big_output_scenario(server: ScriptedLLM, fact: str) -> None:
    server.add(
        f"I will generate the output.\n```python\n{big_program(fact)}```",
        lambda req: Reply.tool_call("retrieve_memory", {"key": last_ref_key(req), "grep": "DEPLOY_TOKEN"}),
        answer_from_tool_result,
    )


async def run_turn(builder: AgentBuilder, task: str, thread_id: str | None = None) -> tuple[list[object], TaskResult]:
    session = await builder.build(thread_id=thread_id)
    events: list[object] = []
    try:
        async for item in session.run_stream(task):
            events.append(item)
    finally:
        await session.close()
    result = events[-1]
    assert isinstance(result, TaskResult)
    return events, result


def output_lines_in(request: RecordedRequest, output: str) -> int:
    body = request.text
    return sum(1 for line in output.splitlines()[::50] if line in body)  # every 50th line: a fair sample


async def test_big_output_is_stored_by_the_executor_and_recalled_with_grep(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    fact = f"zebra-{uuid.uuid4().hex[:6]}"
    script_big_output_scenario(scripted_llm, fact)
    builder = AgentBuilder(store, user_id, model_client=scripted_llm.model_client())

    events, result = await run_turn(builder, "Run a program that prints 30,000 lines and find the deploy token.")

    final = result.messages[-1]
    assert isinstance(final, TextMessage) and final.source == "coder"
    assert fact in final.content
    assert scripted_llm.errors == []
    assert len(scripted_llm.requests) == 3
    stored = [e for e in events if isinstance(e, MemoryStoredEvent)]
    assert len(stored) == 1
    assert await store.retrieve(stored[0].memory_key, user_id=user_id) == expected_output(fact)


async def test_no_request_carries_the_raw_output_and_all_stay_under_budget(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    fact = f"okapi-{uuid.uuid4().hex[:6]}"
    script_big_output_scenario(scripted_llm, fact)
    spec = TeamSpec()
    builder = AgentBuilder(store, user_id, spec=spec, model_client=scripted_llm.model_client())

    await run_turn(builder, "Print the 30,000 line report and tell me the deploy token.")

    output = expected_output(fact)
    assert spec.context.token_budget is not None
    for request in scripted_llm.requests:
        assert output_lines_in(request, output) <= 10  # an excerpt, never the output (600 sampled lines)
        assert request.prompt_tokens <= spec.context.token_budget
    # The fact reached the model only through the grep result, never through the executor's message.
    first_with_fact = next(i for i, r in enumerate(scripted_llm.requests) if fact in r.text)
    assert scripted_llm.requests[first_with_fact - 1].reply is not None
    assert scripted_llm.requests[first_with_fact - 1].reply.tool_calls[0].name == "retrieve_memory"


async def test_tool_calls_and_results_are_valid_pairs_in_every_request(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    script_big_output_scenario(scripted_llm, "pair-check")
    builder = AgentBuilder(store, user_id, model_client=scripted_llm.model_client())

    await run_turn(builder, "Print the report and find the token.")

    last = scripted_llm.requests[-1].messages
    call_ids = [c["id"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    result_ids = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert call_ids and call_ids == result_ids
    assert scripted_llm.errors == []  # the server refuses (400) any request with broken pairs


async def test_code_agent_keeps_its_system_message_on_a_memory_context(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    script_big_output_scenario(scripted_llm, "system-check")
    builder = AgentBuilder(store, user_id, model_client=scripted_llm.model_client())

    await run_turn(builder, "Print the report and find the token.")

    for request in scripted_llm.requests:
        first = request.messages[0]
        assert first["role"] == "system"
        assert first["content"].startswith(CODE_AGENT_SYSTEM_MESSAGE.strip()[:200])
        assert "[MemoryRef:" in first["content"]
        assert {"retrieve_memory", "search_memory", "store_memory"} <= set(request.tool_names)


async def test_stored_output_records_code_language_exit_code_duration_and_thread(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    script_big_output_scenario(scripted_llm, "meta-check")
    builder = AgentBuilder(store, user_id, model_client=scripted_llm.model_client())

    events, _ = await run_turn(builder, "Print the report.", thread_id="thread-meta")

    [event] = [e for e in events if isinstance(e, MemoryStoredEvent)]
    item = await store.get(event.memory_key, user_id=user_id)
    assert item.memory_type == "command_output"
    assert item.thread_id == "thread-meta"
    assert item.metadata["language"] == "python"
    assert item.metadata["exit_code"] == 0
    assert item.metadata["duration_s"] >= 0
    assert "DEPLOY_TOKEN" in item.metadata["code"]


async def test_two_users_in_parallel_never_see_each_others_memory(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    fact_a, fact_b = f"alpha-{uuid.uuid4().hex[:6]}", f"bravo-{uuid.uuid4().hex[:6]}"
    key_a: list[str] = []
    a_stored = threading.Event()

    def a_reads_its_key(req: RecordedRequest) -> Reply:
        key = last_ref_key(req)
        key_a.append(key)
        a_stored.set()
        return Reply.tool_call("retrieve_memory", {"key": key, "grep": "DEPLOY_TOKEN"})

    def b_tries_a_key(req: RecordedRequest) -> Reply:
        assert a_stored.wait(60), "user A never stored its output"
        return Reply.tool_call("retrieve_memory", {"key": key_a[0], "grep": "DEPLOY_TOKEN"})

    with ScriptedLLM() as llm_a, ScriptedLLM() as llm_b:
        llm_a.add(f"```python\n{big_program(fact_a)}```", a_reads_its_key, answer_from_tool_result)
        llm_b.add(f"```python\n{big_program(fact_b)}```", b_tries_a_key, answer_from_tool_result)
        builder_a = AgentBuilder(store, user_id, model_client=llm_a.model_client())
        builder_b = AgentBuilder(store, other_user_id, model_client=llm_b.model_client())

        (_, result_a), (_, result_b) = await asyncio.gather(
            run_turn(builder_a, "Print the report and find the token."),
            run_turn(builder_b, "Print the report and find the token."),
        )

        assert fact_a in str(result_a.messages[-1].to_text())
        assert fact_a not in str(result_b.messages[-1].to_text())
        assert all(fact_a not in r.text for r in llm_b.requests)
        assert all(fact_b not in r.text for r in llm_a.requests)
        b_tool_results = [m["content"] for m in llm_b.requests[-1].messages if m["role"] == "tool"]
        assert f"no memory with key {key_a[0]!r}" in b_tool_results[-1]
    with pytest.raises(MemoryNotFound):
        await store.retrieve(key_a[0], user_id=other_user_id)
    keys_b = {i.memory_key for i in await store.list(user_id=other_user_id)}
    assert key_a[0] not in keys_b


async def test_a_failing_command_is_reported_with_its_exit_code_and_error(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.add(
        "```bash\necho 'starting migration'\necho 'ERROR: relation users does not exist' >&2\nexit 3\n```",
        "The migration failed with exit code 3 (relation users does not exist). TERMINATE",
    )
    builder = AgentBuilder(store, user_id, model_client=scripted_llm.model_client())

    events, _ = await run_turn(builder, "Run the migration.")

    executor_messages = [e for e in events if isinstance(e, TextMessage) and e.source == "executor"]
    assert len(executor_messages) == 1
    seen = scripted_llm.requests[1].text
    assert "FAILED with exit code 3" in seen
    assert "ERROR: relation users does not exist" in seen


async def test_a_command_that_times_out_is_reported_as_timed_out(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.add("```bash\necho waiting\nsleep 30\n```", "It timed out. TERMINATE")
    spec = TeamSpec.model_validate({"executor": {"timeout_seconds": 1}})
    builder = AgentBuilder(store, user_id, spec=spec, model_client=scripted_llm.model_client())

    await run_turn(builder, "Wait for the service.")

    seen = scripted_llm.requests[1].text
    assert "TIMED OUT" in seen
    assert "exit code 124" in seen
    assert "waiting" in seen


async def test_streaming_coder_runs_the_same_scenario_and_streams_chunks(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    fact = f"ibis-{uuid.uuid4().hex[:6]}"
    script_big_output_scenario(scripted_llm, fact)
    spec = TeamSpec.model_validate({"code_agent": {"model_client_stream": True}})
    builder = AgentBuilder(store, user_id, spec=spec, model_client=scripted_llm.model_client())

    events, result = await run_turn(builder, "Print the report and find the token.")

    assert fact in result.messages[-1].to_text()
    assert any(type(e).__name__ == "ModelClientStreamingChunkEvent" for e in events)
    assert all(r.body.get("stream") is True for r in scripted_llm.requests)
    assert scripted_llm.errors == []


async def test_session_stream_marks_what_the_context_stored_and_expanded(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.add(
        "Noted. TERMINATE",
        '```bash\nfor i in $(seq 1 3000); do echo "line $i ok"; done\n'
        "echo 'ERROR E4242 disk quota on /dev/sdb1'\n```",
        "Done. TERMINATE",
        "It reports E4242. TERMINATE",
    )
    session = await AgentBuilder(store, user_id, model_client=scripted_llm.model_client()).build()
    paste = "my settings:\n" + "\n".join(f"setting_{i} = value_{i}" for i in range(400))
    turns: list[list[object]] = []
    for task in (paste, "run the disk check", "what does the output say about the E4242 error?"):
        turns.append([e async for e in session.run_stream(task)])
    await session.close()

    stored_by_context = [e for e in turns[0] if isinstance(e, MemoryContextEvent) and e.action == "stored"]
    assert len(stored_by_context) == 1
    assert await store.retrieve(stored_by_context[0].memory_keys[0], user_id=user_id) == paste
    [executor_stored] = [e for e in turns[1] if isinstance(e, MemoryStoredEvent)]
    expanded = [
        k for e in turns[2] if isinstance(e, MemoryContextEvent) and e.action == "expanded" for k in e.memory_keys
    ]
    assert executor_stored.memory_key in expanded
    assert "ERROR E4242 disk quota" in scripted_llm.requests[-1].text


async def test_a_long_session_stays_under_a_tight_request_budget(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    spec = TeamSpec.model_validate({"context": {"token_budget": 3000}})
    session = await AgentBuilder(store, user_id, spec=spec, model_client=scripted_llm.model_client()).build()
    for turn in range(6):
        scripted_llm.add(
            f'```bash\nfor i in $(seq 1 4000); do echo "run {turn} line $i"; done\n```', f"Run {turn} done. TERMINATE"
        )
        await session.run(f"Run batch number {turn} and summarise it.")
    await session.close()

    assert len(scripted_llm.requests) == 12
    assert scripted_llm.errors == []  # every request had valid call/result pairs
    assert max(r.prompt_tokens for r in scripted_llm.requests) <= 3000
    assert "Run batch number 5" in scripted_llm.requests[-1].text  # the newest turn is always there
