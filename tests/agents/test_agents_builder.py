"""AgentBuilder and team specs: defaults, files, the agents table, the build_model_context hook, CodeAgent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autogen_agentchat.messages import TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat
from autogen_core import CancellationToken
from autogen_core.model_context import ChatCompletionContext, UnboundedChatCompletionContext
from autogen_core.models import SystemMessage, UserMessage
from support.scripted_llm import ScriptedLLM

from agent_memory import MemoryContext, MemoryStore
from agent_memory.agents import AgentBuilder, CodeAgent, TeamSpec, has_code_block


def test_default_spec_is_a_selector_team_of_coder_and_executor() -> None:
    spec = TeamSpec()
    assert (spec.team, spec.code_agent.name, spec.executor.name, spec.termination_text) == (
        "selector", "coder", "executor", "TERMINATE",
    )  # fmt: skip


def test_spec_refuses_unknown_fields() -> None:
    with pytest.raises(ValueError, match="extra"):
        TeamSpec.model_validate({"executor": {"timout_seconds": 5}})


async def test_spec_from_file_and_from_agents_table(store: MemoryStore, tmp_path: Path) -> None:
    spec = TeamSpec.model_validate({"name": f"spec-{tmp_path.name}", "max_turns": 4, "team": "round_robin"})
    path = tmp_path / "team.json"
    spec.to_file(path)
    await spec.save_to_db(store)

    assert await AgentBuilder.load_spec(store, str(path)) == spec
    assert await AgentBuilder.load_spec(store, spec.name) == spec
    with pytest.raises(LookupError):
        await AgentBuilder.load_spec(store, "no-such-spec-anywhere")


async def test_yaml_spec_file(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text("name: y\nexecutor:\n  timeout_seconds: 9\n")
    assert TeamSpec.from_file(path).executor.timeout_seconds == 9


async def test_base_builder_gives_the_coder_a_memory_context_for_the_user_and_thread(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    session = await AgentBuilder(store, user_id, model_client=scripted_llm.model_client()).build(thread_id="th-1")

    context = session.code_agent.model_context
    assert isinstance(context, MemoryContext)
    assert (context.user_id, context.thread_id, context.agent_id) == (user_id, "th-1", "coder")
    assert context.token_budget is not None and context.token_budget < TeamSpec().context.token_budget  # type: ignore[operator]
    assert isinstance(session.team, SelectorGroupChat)
    await session.close()


async def test_subclass_overrides_build_model_context(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    calls: list[tuple[str, str]] = []

    class PlainBuilder(AgentBuilder):
        async def build_model_context(
            self, *, agent_name: str, thread_id: str, reserved_tokens: int
        ) -> ChatCompletionContext:
            calls.append((agent_name, thread_id))
            return UnboundedChatCompletionContext()

    session = await PlainBuilder(store, user_id, model_client=scripted_llm.model_client()).build(thread_id="th-2")

    assert calls == [("coder", "th-2")]
    assert isinstance(session.code_agent.model_context, UnboundedChatCompletionContext)
    await session.close()


async def test_round_robin_spec_builds_a_round_robin_team(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    spec = TeamSpec.model_validate({"team": "round_robin"})
    session = await AgentBuilder(store, user_id, spec=spec, model_client=scripted_llm.model_client()).build()
    assert isinstance(session.team, RoundRobinGroupChat)
    await session.close()


async def test_work_directory_is_per_user_and_per_thread(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    a = AgentBuilder(store, user_id, home="/tmp/h")
    b = AgentBuilder(store, other_user_id, home="/tmp/h")
    assert a.work_dir("t1") != a.work_dir("t2")
    assert a.work_dir("t1") != b.work_dir("t1")
    assert a.work_dir("../../etc").parent == a.work_dir("t1").parent  # ids cannot escape the user's directory


async def test_resumed_thread_continues_the_same_context(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.add("I will remember the codename kestrel. TERMINATE", "You said kestrel. TERMINATE")
    builder = AgentBuilder(store, user_id, model_client=scripted_llm.model_client())
    first = await builder.build(thread_id="resume-me")
    await first.run("The codename is kestrel.")
    await first.close()

    second = await builder.build(thread_id="resume-me")
    await second.run("What was the codename?")
    await second.close()

    assert "The codename is kestrel." in scripted_llm.requests[1].text


async def test_coder_reply_without_code_ends_the_turn(
    store: MemoryStore, user_id: str, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.add("Which branch do you mean?")
    session = await AgentBuilder(store, user_id, model_client=scripted_llm.model_client()).build()

    result = await session.run("Deploy it.")

    assert result.messages[-1].to_text() == "Which branch do you mean?"
    assert len(scripted_llm.requests) == 1
    await session.close()


async def test_code_agent_sends_late_system_notes_as_user_notes_to_single_system_models(
    scripted_llm: ScriptedLLM,
) -> None:
    scripted_llm.add("ok")
    info = {"family": "llama", "vision": False, "function_calling": True, "json_output": False,
            "structured_output": False, "multiple_system_messages": False}  # fmt: skip
    context = UnboundedChatCompletionContext(
        initial_messages=[UserMessage(content="earlier", source="user"), SystemMessage(content="user prefers zsh")]
    )
    agent = CodeAgent("coder", scripted_llm.model_client(model="llama3.1", model_info=info), tools=[],
                      model_context=context)  # fmt: skip

    await agent.on_messages([TextMessage(content="go", source="user")], CancellationToken())

    roles = [m["role"] for m in scripted_llm.requests[0].messages]
    assert roles == ["system", "user", "user", "user"]
    assert scripted_llm.requests[0].messages[2]["content"] == "[system note] user prefers zsh"


def test_code_agent_needs_a_store_and_user_for_its_memory_tools(scripted_llm: ScriptedLLM) -> None:
    with pytest.raises(ValueError, match="store= and user_id="):
        CodeAgent("coder", scripted_llm.model_client())


def test_code_block_detection() -> None:
    assert has_code_block("run:\n```bash\nls\n```")
    assert has_code_block("```python\nprint(1)\n```")
    assert not has_code_block("use `ls` to list files")
    assert not has_code_block("```json\n{}\n```")


def test_spec_json_round_trip() -> None:
    spec = TeamSpec.model_validate({"code_agent": {"extra_instructions": "Prefer pathlib."}})
    assert TeamSpec.model_validate(json.loads(spec.model_dump_json())) == spec
