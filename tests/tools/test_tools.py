"""The memory tools as AutoGen FunctionTools, called the way an agent calls them (run_json)."""

from __future__ import annotations

from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import TextMessage
from autogen_core import CancellationToken
from autogen_core.tools import FunctionTool
from support.scripted_llm import RecordedRequest, Reply, ScriptedLLM

from agent_memory import MemoryStore
from agent_memory.tools import MEMORY_TOOL_NAMES, RetrieveResult, SearchResult, StoreResult, memory_tools


def by_name(tools: list[FunctionTool]) -> dict[str, FunctionTool]:
    return {t.name: t for t in tools}


async def call(tool: FunctionTool, **args: Any) -> Any:
    return await tool.run_json(args, CancellationToken())


def test_tools_have_names_descriptions_and_typed_schemas(store: MemoryStore, user_id: str) -> None:
    tools = by_name(memory_tools(store, user_id))
    assert set(tools) == {"retrieve_memory", "search_memory", "store_memory", "list_memories", "update_memory"}
    assert set(tools) == MEMORY_TOOL_NAMES
    retrieve = tools["retrieve_memory"].schema
    assert "MemoryRef" in retrieve.get("description", "")
    params = retrieve.get("parameters", {})
    assert params.get("required") == ["key"]
    props = params["properties"]
    assert props["key"]["type"] == "string"
    assert "line range" in props["lines"]["description"]
    assert props["context"]["type"] == "integer"
    assert props["ignore_case"]["type"] == "boolean"
    # No tool lets the model name a user.
    for tool in tools.values():
        assert not any("user" in p for p in tool.schema.get("parameters", {}).get("properties", {}))


def test_list_tool_can_be_left_out(store: MemoryStore, user_id: str) -> None:
    names = [t.name for t in memory_tools(store, user_id, include_list=False)]
    assert names == ["retrieve_memory", "search_memory", "store_memory", "update_memory"]


async def test_store_search_retrieve_round_trip(store: MemoryStore, user_id: str) -> None:
    tools = by_name(memory_tools(store, user_id, thread_id="th"))
    saved = await call(tools["store_memory"], content="db host is pg-prod-7\nport 6432\n", description="prod db")
    assert isinstance(saved, StoreResult)
    found = await call(tools["search_memory"], query="prod db host")
    assert isinstance(found, SearchResult) and found.results[0].key == saved.key
    got = await call(tools["retrieve_memory"], key=saved.key, grep="port")
    assert isinstance(got, RetrieveResult) and got.content == "2:port 6432"


async def test_model_reads_compact_text_not_json(store: MemoryStore, user_id: str) -> None:
    tools = by_name(memory_tools(store, user_id))
    saved = await call(tools["store_memory"], content="a\nb\n", description="two lines")
    got = await call(tools["retrieve_memory"], key=saved.key)
    text = tools["retrieve_memory"].return_value_as_string(got)
    assert text == f"[{saved.key} - two lines - {saved.token_count} tokens, 2 lines; view: full]\na\nb\n"
    assert tools["store_memory"].return_value_as_string(saved) == f"Stored as {saved.placeholder}"


async def test_tools_only_see_their_users_memories(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    mine = by_name(memory_tools(store, user_id))
    theirs = by_name(memory_tools(store, other_user_id))
    secret = await call(theirs["store_memory"], content="launch code 0000-SECRET", description="secret")
    assert (await call(mine["search_memory"], query="launch code SECRET")).results == []
    assert (await call(mine["list_memories"])).memories == []
    with pytest.raises(ValueError, match="no memory with key"):
        await call(mine["retrieve_memory"], key=secret.key)


async def test_extra_user_argument_is_ignored(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    theirs = by_name(memory_tools(store, other_user_id))
    secret = await call(theirs["store_memory"], content="theirs", description="theirs")
    mine = by_name(memory_tools(store, user_id))
    with pytest.raises(ValueError, match="no memory with key"):
        await call(mine["retrieve_memory"], key=secret.key, user_id=other_user_id)


async def test_wrong_argument_types_are_rejected_by_the_schema(store: MemoryStore, user_id: str) -> None:
    tools = by_name(memory_tools(store, user_id))
    with pytest.raises(ValueError, match="head"):
        await call(tools["retrieve_memory"], key="note_ffffffffffff", head="many")


async def test_invalid_regex_is_a_tool_error(store: MemoryStore, user_id: str) -> None:
    tools = by_name(memory_tools(store, user_id))
    saved = await call(tools["store_memory"], content="x", description="x")
    with pytest.raises(ValueError, match="invalid grep regular expression"):
        await call(tools["retrieve_memory"], key=saved.key, grep="[unclosed")


async def test_an_assistant_agent_calls_retrieve_and_the_model_reads_the_rendered_view(
    store: MemoryStore, user_id: str
) -> None:
    log = "".join(f"worker step {i} ok\n" for i in range(1, 20_001)).replace(
        "worker step 12345 ok\n", "worker step 12345 FATAL quota exceeded on bucket b-77\n"
    )
    key = await store.store(log, user_id=user_id, description="worker log", memory_type="command_output")

    def answer(request: RecordedRequest) -> str:
        tool_results = [m["content"] for m in request.messages if m.get("role") == "tool"]
        return "Found: " + tool_results[-1].splitlines()[1]

    with ScriptedLLM([Reply.tool_call("retrieve_memory", {"key": key, "grep": "FATAL"}), answer]) as llm:
        agent = AssistantAgent(
            "coder", model_client=llm.model_client(), tools=memory_tools(store, user_id), reflect_on_tool_use=True
        )
        result = await agent.run(task=TextMessage(content=f"What failed in {key}?", source="user"))
        assert llm.errors == []
        first, second = llm.requests
    assert set(first.tool_names) == {
        "retrieve_memory",
        "search_memory",
        "store_memory",
        "list_memories",
        "update_memory",
    }
    tool_message = next(m for m in second.messages if m.get("role") == "tool")
    tokens = (await store.get(key, user_id=user_id)).token_count
    assert tool_message["content"] == (
        f"[{key} - worker log - {tokens} tokens, 20000 lines; view: grep='FATAL']\n"
        "12345:worker step 12345 FATAL quota exceeded on bucket b-77"
    )
    assert "worker step 1 ok" not in second.text  # the raw output never reached the model
    final = result.messages[-1]
    assert (
        isinstance(final, TextMessage)
        and final.content == "Found: 12345:worker step 12345 FATAL quota exceeded on bucket b-77"
    )
