"""The CodeAgent team with procedural memory, against the scripted OpenAI-compatible server.

A repeated task: the first run writes code (the executor runs it) and registers it as a skill; the second run
sees the matching skill listed (SkillHints) and uses it: fewer model requests, fewer prompt tokens, no code
written, the same result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import CodeExecutionEvent, TextMessage
from support.scripted_llm import RecordedRequest, Reply, ScriptedLLM, scripted_llm  # noqa: F401  (fixture)

from agent_memory import MemoryStore
from agent_memory.agents import HINT_HEADER, AgentBuilder, SkillsAgentBuilder, fix_description, learn_from_run
from agent_memory.skills import ProceduralMemorySettings

TASK = "What is the sum of the squares of the integers from 1 to 1000?"
FUNCTION = "def sum_of_squares(n: int = 1000) -> int:\n    return sum(i * i for i in range(1, n + 1))\n"
CODE_REPLY = f"I'll compute it.\n```python\n{FUNCTION}\nprint(sum_of_squares(1000))\n```"
ENABLED = ProceduralMemorySettings(enabled=True)


def final_answer(note: str) -> Callable[[RecordedRequest], str]:
    """The model's last reply: the number the code (or skill) printed, read from what it received."""

    def reply(request: RecordedRequest) -> str:
        outputs = re.findall(r"Output:\n(\S+)", "\n".join(request.contents()))
        return f"The sum is {outputs[-1]}. {note} TERMINATE"

    return reply


def use_found_skill(request: RecordedRequest) -> Reply:
    """Call use_skill with the first skill search_skills returned (as a model would)."""
    found = re.search(r"^- (\w+) \(v\d+", "\n".join(request.contents()), re.MULTILINE)
    assert found, request.messages[-1]
    return Reply.tool_call("use_skill", {"name": found.group(1), "parameters": {"n": 1000}})


def first_run_script() -> list[Any]:
    return [
        Reply.tool_call("search_skills", {"query": "sum of squares of integers 1 to n"}),
        CODE_REPLY,
        Reply.tool_call("register_skill", {"name": "sum_of_squares", "code": FUNCTION,
                                           "description": "Sum of the squares of the integers from 1 to n"}),
        final_answer('I created a reusable skill "sum_of_squares" for similar requests.'),
    ]  # fmt: skip


def second_run_script() -> list[Any]:
    # The matching skill is already listed in the first request (SkillHints): no search_skills call needed.
    return [use_found_skill, final_answer('I used the learned skill "sum_of_squares".')]


@pytest.fixture
def builder(store: MemoryStore, user_id: str, tmp_path: Path, scripted_llm: ScriptedLLM) -> SkillsAgentBuilder:  # noqa: F811
    """A team builder with procedural memory on, driven by the scripted model."""
    return SkillsAgentBuilder(store, user_id, procedural_memory=ENABLED, model_client=scripted_llm.model_client(),
                              home=tmp_path)  # fmt: skip


def final_text(result: TaskResult) -> str:
    texts = [m.content for m in result.messages if isinstance(m, TextMessage) and m.source == "coder"]
    return texts[-1]


async def run_task(builder: AgentBuilder, thread: str) -> TaskResult:
    session = await builder.build(thread_id=thread)
    try:
        return await session.run(TASK)
    finally:
        await session.close()


async def test_second_run_reuses_the_skill_with_fewer_requests_and_tokens(
    builder: SkillsAgentBuilder,
    scripted_llm: ScriptedLLM,  # noqa: F811
) -> None:
    scripted_llm.add(*first_run_script())
    first = await run_task(builder, "thread-1")
    first_requests = list(scripted_llm.requests)
    scripted_llm.add(*second_run_script())
    second = await run_task(builder, "thread-2")
    second_requests = scripted_llm.requests[len(first_requests) :]
    assert scripted_llm.errors == []

    assert "333833500" in final_text(first) and "333833500" in final_text(second)  # the same result
    assert 'I used the learned skill "sum_of_squares"' in final_text(second)
    first_runs = [m for m in first.messages if isinstance(m, CodeExecutionEvent)]
    assert len(first_runs) == 1 and first_runs[0].result.exit_code == 0
    # The second run wrote no code and the executor ran nothing; the skill ran in the sandbox instead.
    assert not any(isinstance(m, CodeExecutionEvent) for m in second.messages)
    assert not any("```" in m.content for m in second.messages if isinstance(m, TextMessage) and m.source == "coder")
    assert (len(first_requests), len(second_requests)) == (4, 2)
    assert HINT_HEADER not in first_requests[0].text
    assert HINT_HEADER in "\n".join(second_requests[0].contents())
    first_tokens = sum(r.prompt_tokens for r in first_requests)
    second_tokens = sum(r.prompt_tokens for r in second_requests)
    assert second_tokens < first_tokens
    skill = await builder.procedural_memory("coder", "thread-2").get_skill("sum_of_squares")  # type: ignore[union-attr]
    assert (skill.execution_count, skill.success_count, skill.source) == (1, 1, "agent")


async def test_enabled_builder_gives_the_coder_skill_tools_and_the_prompt(
    builder: SkillsAgentBuilder,
    scripted_llm: ScriptedLLM,  # noqa: F811
) -> None:
    session = await builder.build(thread_id="t")
    names = [t.name for t in session.code_agent.tools]
    skills = builder.procedural_memory("coder", "t")
    assert skills is not None and skills.executor is session.code_executor  # skills run in the team's sandbox
    await session.close()
    assert {"search_skills", "use_skill", "register_skill", "retrieve_memory"} <= set(names)
    assert "I used the learned skill" in session.code_agent.system_message


async def test_disabled_builder_builds_exactly_the_plain_team(
    store: MemoryStore,
    user_id: str,
    tmp_path: Path,
    scripted_llm: ScriptedLLM,  # noqa: F811
) -> None:
    plain = await AgentBuilder(store, user_id, model_client=scripted_llm.model_client(), home=tmp_path).build("t")
    gated = await SkillsAgentBuilder(store, user_id, procedural_memory=ProceduralMemorySettings(enabled=False),
                                     model_client=scripted_llm.model_client(), home=tmp_path).build("t")  # fmt: skip
    try:
        assert gated.code_agent.system_message == plain.code_agent.system_message
        assert [json.dumps(t.schema, sort_keys=True) for t in gated.code_agent.tools] == [
            json.dumps(t.schema, sort_keys=True) for t in plain.code_agent.tools
        ]
    finally:
        await plain.close()
        await gated.close()


BUGGY = FUNCTION.replace("range(", "rnage(")
BUGGY_REPLY = f"```python\n{BUGGY}\nprint(sum_of_squares(1000))\n```"


async def test_a_run_that_failed_then_worked_leaves_a_lesson_and_a_pending_skill(
    store: MemoryStore,
    user_id: str,
    tmp_path: Path,
    scripted_llm: ScriptedLLM,  # noqa: F811
) -> None:
    settings = ProceduralMemorySettings(enabled=True, learn_from_runs=True)
    builder = SkillsAgentBuilder(store, user_id, procedural_memory=settings, model_client=scripted_llm.model_client(),
                                 home=tmp_path)  # fmt: skip
    scripted_llm.add(BUGGY_REPLY, CODE_REPLY, final_answer("Done."))
    result = await run_task(builder, "thread-x")  # AgentSession learns after the run
    assert [m.result.exit_code for m in result.messages if isinstance(m, CodeExecutionEvent)] == [1, 0]
    memory = builder.procedural_memory("coder", "thread-x")
    assert memory is not None

    [lesson] = await memory.recall_lessons("sum of the squares of the integers from 1 to 2000")
    assert "NameError: name 'rnage' is not defined" in lesson.error
    assert (
        lesson.do
        == "use `return sum(i * i for i in range(1, n + 1))` instead of `return sum(i * i for i in rnage(1, n + 1))`"
    )

    skill = await memory.get_skill("sum_of_squares")
    assert (skill.status, skill.source, "print(" in skill.code) == ("pending_approval", "capture", False)
    assert await memory.search_skills(TASK) == []  # a proposal: not used until approved
    await memory.approve("sum_of_squares")
    assert (await memory.use_skill("sum_of_squares")).output.strip() == "333833500"


async def test_without_learn_from_runs_a_run_leaves_nothing(
    builder: SkillsAgentBuilder,
    scripted_llm: ScriptedLLM,  # noqa: F811
) -> None:
    scripted_llm.add(BUGGY_REPLY, CODE_REPLY, final_answer("Done."))
    result = await run_task(builder, "thread-y")
    memory = builder.procedural_memory("coder", "thread-y")
    assert memory is not None
    assert await memory.list_skills() == []
    assert await memory.recall_lessons(TASK) == []
    # learn_from_run on the same messages, called explicitly, does learn; and does nothing when memory is off
    learned = await learn_from_run(memory, TASK, result.messages, skill_status="active")
    assert learned.skill is not None and learned.skill.skill.status == "active" and len(learned.lessons) == 1
    assert (await learn_from_run(None, TASK, result.messages)).skill is None


def test_fix_description_names_the_changed_lines() -> None:
    assert fix_description("import csv\nopen(p)\n", "import csv\nopen(p, encoding='latin-1')\n") == (
        "use `open(p, encoding='latin-1')` instead of `open(p)`"
    )
    assert fix_description("x = 1\n", "x = 1\n") == "run the same code again (it failed once, then worked)"


async def test_any_agent_builder_gets_skills_from_the_environment(
    store: MemoryStore,
    user_id: str,
    tmp_path: Path,
    scripted_llm: ScriptedLLM,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_SKILLS_ENABLED", "true")
    session = await AgentBuilder(store, user_id, model_client=scripted_llm.model_client(), home=tmp_path).build("t")
    await session.close()
    assert {"search_skills", "use_skill", "register_skill"} <= {t.name for t in session.code_agent.tools}


async def test_skill_hints_note_only_user_requests_that_match_once(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    from autogen_core.model_context import UnboundedChatCompletionContext
    from autogen_core.models import SystemMessage, UserMessage

    from agent_memory.agents import SkillHints
    from agent_memory.skills import ProceduralMemory

    skills = ProceduralMemory(store, user_id=user_id, agent_id="coder", settings=ENABLED)  # hints only: no runs
    await skills.register_skill("sum_of_squares", "Sum of the squares of the integers from 1 to n", FUNCTION)
    hints = SkillHints(skills)
    context = UnboundedChatCompletionContext()

    await context.add_message(UserMessage(content="Exit code 0. Output: sum of squares", source="executor"))
    assert (await hints.update_context(context)).memories.results == []  # executor output: no hint

    await context.add_message(UserMessage(content=TASK, source="user"))
    result = await hints.update_context(context)
    assert [m.content for m in result.memories.results] == ["sum_of_squares"]
    note = (await context.get_messages())[-1]
    assert isinstance(note, SystemMessage) and note.content.startswith(HINT_HEADER)
    assert "- sum_of_squares (v1, 0 runs): Sum of the squares of the integers from 1 to n" in note.content
    assert '"n": {"type": "integer", "default": 1000}' in note.content

    await context.add_message(UserMessage(content=TASK, source="user"))
    assert (await hints.update_context(context)).memories.results == []  # same note already there
    await context.add_message(UserMessage(content="resize the profile pictures", source="user"))
    assert (await hints.update_context(context)).memories.results == []  # nothing matches: nothing added
    assert sum(isinstance(m, SystemMessage) for m in await context.get_messages()) == 1
