"""The skill tools as the CodeAgent gets them: gated by settings (off: no change), bound to one user and agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_core import CancellationToken
from autogen_core.tools import FunctionTool
from support.scripted_llm import Reply, ScriptedLLM, scripted_llm  # noqa: F401  (fixture)
from support.skills import procedural_memory

from agent_memory import MemoryStore
from agent_memory.skills import ProceduralMemory, ProceduralMemorySettings, skill_tools, skills_system_message

ADD = "def add_numbers(a: int, b: int) -> int:\n    return a + b\n"


def memory(store: MemoryStore, user: str, tmp_path: Path, **settings: Any) -> ProceduralMemory:
    return procedural_memory(store, user, settings=ProceduralMemorySettings(**settings), work_dir=tmp_path / "sandbox")


def by_name(tools: list[FunctionTool]) -> dict[str, FunctionTool]:
    return {t.name: t for t in tools}


async def call(tool: FunctionTool, **args: Any) -> str:
    return tool.return_value_as_string(await tool.run_json(args, CancellationToken()))


def test_disabled_procedural_memory_adds_no_tools_and_no_prompt(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    disabled = memory(store, user_id, tmp_path)
    assert disabled.settings.enabled is False  # the default
    assert skill_tools(disabled) == []
    assert skill_tools(None) == []
    assert skills_system_message(disabled.settings) == ""


async def test_disabled_agent_sends_exactly_the_same_request_as_an_agent_without_skills(
    store: MemoryStore,
    user_id: str,
    tmp_path: Path,
    scripted_llm: ScriptedLLM,  # noqa: F811
) -> None:
    scripted_llm.add("Done.", "Done.")
    disabled = memory(store, user_id, tmp_path)
    base = "You write Python code."
    plain = AssistantAgent("coder", model_client=scripted_llm.model_client(), system_message=base)
    gated = AssistantAgent("coder", model_client=scripted_llm.model_client(), tools=skill_tools(disabled),
                           system_message=base + skills_system_message(disabled.settings))  # fmt: skip
    await plain.run(task="sum 1 and 2")
    await gated.run(task="sum 1 and 2")
    first, second = scripted_llm.requests
    assert first.body == second.body
    assert "tools" not in second.body


def test_enabled_tools_have_typed_schemas_and_no_user_argument(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    tools = by_name(skill_tools(memory(store, user_id, tmp_path, enabled=True)))
    assert set(tools) == {"search_skills", "use_skill", "register_skill"}
    assert tools["use_skill"].schema["parameters"]["required"] == ["name"]
    assert tools["register_skill"].schema["parameters"]["required"] == ["name", "description", "code"]
    for tool in tools.values():
        assert not any("user" in p or "agent" in p for p in tool.schema["parameters"]["properties"])
    prompt = skills_system_message(ProceduralMemorySettings(enabled=True))
    assert "search_skills" in prompt and 'I used the learned skill "<name>"' in prompt
    assert "I created a reusable skill" in prompt


def test_register_tool_is_left_out_when_agents_may_not_register(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    tools = skill_tools(memory(store, user_id, tmp_path, enabled=True, auto_register_skills=False))
    assert [t.name for t in tools] == ["search_skills", "use_skill"]
    assert "register_skill" not in skills_system_message(
        ProceduralMemorySettings(enabled=True, auto_register_skills=False)
    )


async def test_register_search_use_through_the_tools(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    tools = by_name(skill_tools(memory(store, user_id, tmp_path, enabled=True)))
    registered = await call(tools["register_skill"], name="add_numbers", description="Add two integers", code=ADD)
    assert registered.startswith("Skill 'add_numbers' created.")
    assert 'Tell the user: I created a reusable skill "add_numbers" for similar requests.' in registered
    found = await call(tools["search_skills"], query="add two numbers")
    assert "add_numbers (v1, 0 runs): Add two integers" in found
    assert '"required": ["a", "b"]' in found
    ran = await call(tools["use_skill"], name="add_numbers", parameters={"a": 2, "b": 40})
    assert ran == "Skill add_numbers v1 succeeded.\nOutput:\n42\n"


async def test_tool_errors_are_messages_the_model_can_act_on(
    store: MemoryStore, user_id: str, other_user_id: str, tmp_path: Path
) -> None:
    await memory(store, other_user_id, tmp_path, enabled=True).register_skill("add_numbers", "Add", ADD)
    tools = by_name(skill_tools(memory(store, user_id, tmp_path, enabled=True, require_skill_approval=True)))
    assert await call(tools["use_skill"], name="add_numbers", parameters={"a": 1, "b": 2}) == (
        "No skill named 'add_numbers'; call search_skills first."
    )
    assert "waiting for approval" in await call(tools["register_skill"], name="add_numbers", description="Add",
                                                code=ADD)  # fmt: skip
    assert "waiting for approval" in await call(tools["use_skill"], name="add_numbers", parameters={"a": 1, "b": 2})
    assert "was not registered: the skill code is not valid Python" in await call(
        tools["register_skill"], name="bad", description="Bad", code="def bad(:"
    )
    assert await call(tools["search_skills"], query="add numbers") == (
        "No learned skill matches this task; write the code yourself."
    )


async def test_search_returns_lessons_from_past_failures(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path, enabled=True)
    await skills.record_failure_lesson("parse the billing CSV export", "UnicodeDecodeError: 'utf-8' codec",
                                       "open it with encoding='latin-1'")  # fmt: skip
    text = await call(by_name(skill_tools(skills))["search_skills"], query="parse billing CSV export")
    assert "Lessons from past failures on similar tasks:" in text
    assert "- When parse the billing CSV export: open it with encoding='latin-1'" in text


async def test_registering_over_a_rejected_skill_says_it_will_not_be_used(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path, enabled=True)
    await skills.register_skill("add_numbers", "Add", ADD)
    await skills.reject("add_numbers")
    text = await call(by_name(skill_tools(skills))["register_skill"], name="add_numbers", description="Add",
                      code=ADD.replace("a + b", "b + a"))  # fmt: skip
    assert text == "Skill 'add_numbers' updated to version 2. An operator rejected this skill: it will not be used."
