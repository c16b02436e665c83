"""Model configuration from the environment: OpenAI, OpenAI-compatible servers, component JSON, memory model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autogen_core.models import UserMessage
from autogen_ext.models.openai import OpenAIChatCompletionClient
from support.scripted_llm import ScriptedLLM

from agent_memory.agents import ModelConfigError, load_memory_model_client, load_model_client


def test_nothing_configured_says_exactly_what_to_set() -> None:
    with pytest.raises(ModelConfigError) as info:
        load_model_client({})
    message = str(info.value)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENT_MEMORY_MODEL", "AGENT_MEMORY_MODEL_CONFIG"):
        assert name in message


def test_api_key_alone_selects_the_default_openai_model() -> None:
    client = load_model_client({"OPENAI_API_KEY": "sk-test"})
    assert isinstance(client, OpenAIChatCompletionClient)
    assert client.model_info["family"] == "gpt-4o"


def test_base_url_without_model_name_asks_for_agent_memory_model() -> None:
    with pytest.raises(ModelConfigError, match="set AGENT_MEMORY_MODEL"):
        load_model_client({"OPENAI_BASE_URL": "http://localhost:11434/v1"})


def test_local_model_gets_default_capabilities_overridable_by_flags() -> None:
    client = load_model_client(
        {
            "OPENAI_BASE_URL": "http://localhost:11434/v1",
            "AGENT_MEMORY_MODEL": "qwen2.5-coder:7b",
            "AGENT_MEMORY_MODEL_FAMILY": "qwen",
            "AGENT_MEMORY_MODEL_VISION": "false",
            "AGENT_MEMORY_MODEL_JSON_OUTPUT": "true",
        }
    )
    info = client.model_info
    assert (info["family"], info["vision"], info["function_calling"], info["json_output"]) == (
        "qwen",
        False,
        True,
        True,
    )


def test_model_info_json_describes_an_unknown_model() -> None:
    info = {"family": "llama", "vision": False, "function_calling": True, "json_output": False}
    client = load_model_client(
        {
            "OPENAI_BASE_URL": "http://vllm:8000/v1",
            "AGENT_MEMORY_MODEL": "llama3.1",
            "AGENT_MEMORY_MODEL_INFO": json.dumps(info),
        }
    )
    assert client.model_info["family"] == "llama"


def test_unknown_model_info_field_is_refused() -> None:
    with pytest.raises(ModelConfigError, match="unknown fields"):
        load_model_client(
            {"OPENAI_BASE_URL": "http://x/v1", "AGENT_MEMORY_MODEL": "m", "AGENT_MEMORY_MODEL_INFO": '{"colour": 1}'}
        )


def test_bad_boolean_flag_names_the_variable() -> None:
    with pytest.raises(ModelConfigError, match="AGENT_MEMORY_MODEL_VISION"):
        load_model_client(
            {"OPENAI_BASE_URL": "http://x/v1", "AGENT_MEMORY_MODEL": "m", "AGENT_MEMORY_MODEL_VISION": "maybe"}
        )


def test_unknown_openai_model_without_info_is_explained() -> None:
    with pytest.raises(ModelConfigError, match="AGENT_MEMORY_MODEL_INFO"):
        load_model_client({"OPENAI_API_KEY": "sk-test", "AGENT_MEMORY_MODEL": "my-finetune"})


async def test_component_json_file_builds_any_chat_completion_client(scripted_llm: ScriptedLLM, tmp_path: Path) -> None:
    scripted_llm.add("pong")
    component = scripted_llm.model_client().dump_component().model_dump(mode="json")
    path = tmp_path / "model.json"
    path.write_text(json.dumps(component))

    client = load_model_client({"AGENT_MEMORY_MODEL_CONFIG": str(path)})
    result = await client.create([UserMessage(content="ping", source="user")])

    assert result.content == "pong"
    assert scripted_llm.requests[0].messages[-1]["content"] == "ping"


def test_component_json_that_is_not_a_component_is_refused() -> None:
    with pytest.raises(ModelConfigError, match="component JSON"):
        load_model_client({"AGENT_MEMORY_MODEL_CONFIG": '{"model": "gpt-4o"}'})


def test_missing_component_file_is_named() -> None:
    with pytest.raises(ModelConfigError, match="no such file"):
        load_model_client({"AGENT_MEMORY_MODEL_CONFIG": "/nonexistent/model.json"})


def test_memory_model_is_optional_and_reuses_the_main_endpoint() -> None:
    assert load_memory_model_client({"OPENAI_API_KEY": "sk-test"}) is None
    env = {"OPENAI_BASE_URL": "http://localhost:11434/v1", "AGENT_MEMORY_MEMORY_MODEL": "qwen2.5:0.5b"}
    client = load_memory_model_client(env)
    assert client is not None
    assert client.model_info["family"] == "unknown"


async def test_env_configured_client_talks_to_the_endpoint(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.add("hello from the endpoint")
    client = load_model_client(
        {
            "OPENAI_BASE_URL": scripted_llm.base_url,
            "AGENT_MEMORY_MODEL": "llama3.1",
            "AGENT_MEMORY_MODEL_FAMILY": "llama",
        }
    )

    result = await client.create([UserMessage(content="hi", source="user")])

    assert result.content == "hello from the endpoint"
    assert scripted_llm.requests[0].body["model"] == "llama3.1"
