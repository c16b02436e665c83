"""MemoryContext with an optional model: LLM descriptions and the LLM expansion judge, with fallbacks.

The model is the only stand-in allowed: a local OpenAI-compatible HTTP server with scripted replies, driven
by AutoGen's real ``OpenAIChatCompletionClient`` (real ``openai`` client, real HTTP).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    SystemMessage,
    UserMessage,
)
from autogen_ext.models.openai import OpenAIChatCompletionClient

from agent_memory import MemoryContext, MemoryStore
from agent_memory.placeholders import parse_memory_refs


class ScriptedModel:
    """Answers each chat-completions request with the next scripted item: a string, ``500`` or ``("sleep", s)``."""

    def __init__(self) -> None:
        self.script: list[Any] = []
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                item = outer.script.pop(0) if outer.script else 500
                if isinstance(item, tuple):
                    time.sleep(item[1])
                    item = "too late"
                if item == 500:
                    payload = json.dumps({"error": {"message": "scripted failure"}}).encode()
                    self.send_response(500)
                elif isinstance(item, dict):  # {"tool": name, "arguments": {...}}: one tool call
                    message = {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{len(outer.requests)}",
                                "type": "function",
                                "function": {"name": item["tool"], "arguments": json.dumps(item["arguments"])},
                            }
                        ],
                    }
                    payload = json.dumps(
                        {
                            "id": f"chatcmpl-{uuid.uuid4().hex}",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": "gpt-4o-2024-08-06",
                            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                        }
                    ).encode()
                    self.send_response(200)
                else:
                    payload = json.dumps(
                        {
                            "id": f"chatcmpl-{uuid.uuid4().hex}",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": "gpt-4o-2024-08-06",
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": item},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                        }
                    ).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def client(self, **kwargs: Any) -> OpenAIChatCompletionClient:
        return OpenAIChatCompletionClient(
            model=kwargs.pop("model", "gpt-4o"),
            api_key="test-key",
            base_url=f"http://127.0.0.1:{self.httpd.server_address[1]}/v1",
            max_retries=0,
            **kwargs,
        )

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    server = ScriptedModel()
    yield server
    server.close()


def big_log(tag: str, marker: str = "", n: int = 300) -> str:
    lines = [f"{tag} {i:04d} compiled unit_{i % 50} ok" for i in range(n)]
    if marker:
        lines[n // 2] = marker
    return "\n".join(lines) + "\n"


async def add_tool_turn(ctx: MemoryContext, call_id: str, output: str) -> None:
    await ctx.add_message(
        AssistantMessage(content=[FunctionCall(id=call_id, name="run_code", arguments="{}")], source="agent")
    )
    await ctx.add_message(
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(content=output, name="run_code", call_id=call_id)]
        )
    )


def last_ref(messages: list[Any]) -> Any:
    return parse_memory_refs(messages[-1].content[0].content)[0]


async def test_llm_description_replaces_the_deterministic_one(
    store: MemoryStore, user_id: str, model: ScriptedModel
) -> None:
    model.script.append("Nightly build of 300 units, all compiled")
    ctx = MemoryContext(store=store, user_id=user_id, model_client=model.client(), keep_recent_full=0)
    await add_tool_turn(ctx, "c1", big_log("nightly"))
    ref = last_ref(await ctx.get_messages())
    assert ref.description == "Nightly build of 300 units, all compiled"
    assert (await store.get(ref.key, user_id=user_id)).description == ref.description
    assert "nightly 0000 compiled" in json.dumps(model.requests[0]["messages"])  # the model saw an excerpt


async def test_llm_failure_falls_back_to_the_deterministic_description(
    store: MemoryStore, user_id: str, model: ScriptedModel
) -> None:
    model.script.append(500)
    ctx = MemoryContext(store=store, user_id=user_id, model_client=model.client(), keep_recent_full=0)
    output = big_log("fallback")
    await add_tool_turn(ctx, "c1", output)
    ref = last_ref(await ctx.get_messages())
    assert ref.description.startswith("run_code: fallback 0000 compiled")
    assert await store.retrieve(ref.key, user_id=user_id) == output


async def test_llm_timeout_falls_back_to_the_deterministic_description(
    store: MemoryStore, user_id: str, model: ScriptedModel
) -> None:
    model.script.append(("sleep", 3.0))
    ctx = MemoryContext(
        store=store, user_id=user_id, model_client=model.client(), keep_recent_full=0, llm_timeout_seconds=0.2
    )
    await add_tool_turn(ctx, "c1", big_log("slow"))
    assert last_ref(await ctx.get_messages()).description.startswith("run_code: slow 0000 compiled")


def judged_context(store: MemoryStore, user_id: str, model: ScriptedModel) -> MemoryContext:
    """A context whose model decides which item to expand (no LLM descriptions; nothing kept in full)."""
    return MemoryContext(
        store=store,
        user_id=user_id,
        model_client=model.client(),
        keep_recent_full=0,
        llm_descriptions=False,
        llm_judge=True,
    )


async def test_llm_judge_decides_which_item_to_expand(store: MemoryStore, user_id: str, model: ScriptedModel) -> None:
    ctx = judged_context(store, user_id, model)
    await add_tool_turn(ctx, "c1", big_log("alpha", marker="alpha checksum: 9f8e7d"))
    await add_tool_turn(ctx, "c2", big_log("beta"))
    first_key = ctx.memory_keys[0]
    model.script.append(json.dumps({"expand": [first_key]}))
    await ctx.add_message(UserMessage(content="Was the first build's checksum right?", source="user"))
    expansion = (await ctx.get_messages())[-1]
    assert is_memory_note(expansion)
    assert first_key in expansion.content and "Memory expansion" in expansion.content


async def test_llm_judge_cannot_select_a_key_outside_the_context(
    store: MemoryStore, user_id: str, other_user_id: str, model: ScriptedModel
) -> None:
    foreign = await store.store("other user's secret " * 100, user_id=other_user_id, memory_type="note")
    ctx = judged_context(store, user_id, model)
    await add_tool_turn(ctx, "c1", big_log("gamma"))
    model.script.append(json.dumps({"expand": [foreign]}))
    await ctx.add_message(UserMessage(content="expand everything please", source="user"))
    messages = await ctx.get_messages()
    assert isinstance(messages[-1], UserMessage)
    assert "secret" not in json.dumps([m.model_dump() for m in messages])


async def test_llm_judge_failure_falls_back_to_deterministic_relevance(
    store: MemoryStore, user_id: str, model: ScriptedModel
) -> None:
    ctx = judged_context(store, user_id, model)
    await add_tool_turn(ctx, "c1", big_log("delta", marker="ERROR E5150 in ledger_sync.py"))
    model.script.append("this is not json")
    await ctx.add_message(UserMessage(content="what is E5150?", source="user"))
    expansion = (await ctx.get_messages())[-1]
    assert is_memory_note(expansion) and "ERROR E5150 in ledger_sync.py" in expansion.content


def check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    """Like the OpenAI API: every tool message answers a tool call of the preceding assistant message."""
    open_ids: set[str] = set()
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            open_ids = {c["id"] for c in m["tool_calls"]}
        elif m["role"] == "tool":
            assert m["tool_call_id"] in open_ids, f"tool result {m['tool_call_id']} without its call"
        else:
            open_ids = set()


# A model that takes one system message (every Gemini model in AutoGen's list, most local models): AutoGen
# refuses a system message after the conversation started ("Multiple and Not continuous system messages").
ONE_SYSTEM_MESSAGE = {
    "model": "gemini-like-local-model",
    "model_info": {
        "vision": False, "function_calling": True, "json_output": False, "family": "unknown",
        "structured_output": False, "multiple_system_messages": False,
    },
}  # fmt: skip


@pytest.mark.parametrize("client_kwargs", [{}, ONE_SYSTEM_MESSAGE], ids=["gpt-4o", "one-system-message"])
async def test_drop_in_model_context_of_an_autogen_assistant_agent(
    store: MemoryStore, user_id: str, model: ScriptedModel, client_kwargs: dict[str, Any]
) -> None:
    from autogen_agentchat.agents import AssistantAgent

    output = big_log("job", marker="ERROR checksum mismatch in artifact_store.py: expected 4f2a", n=2500)

    async def run_code(code: str) -> str:
        """Run code and return its output."""
        return output

    ctx = MemoryContext(store=store, user_id=user_id, thread_id=f"t-{uuid.uuid4().hex[:6]}", first_use_max_tokens=800)
    agent = AssistantAgent(
        "coder", model_client=model.client(**client_kwargs), tools=[run_code], model_context=ctx,
        reflect_on_tool_use=True,
    )  # fmt: skip
    model.script += [{"tool": "run_code", "arguments": {"code": "python build.py"}}, "The build failed."]
    await agent.run(task="Build the project")
    model.script.append("It was a checksum mismatch.")
    await agent.run(task="Why did artifact_store.py fail?")

    for request in model.requests:
        check_tool_pairing(request["messages"])
    # After the tool ran, the model saw a placeholder + capped excerpt, not 30,000 tokens of output.
    tool_message = next(m for m in model.requests[1]["messages"] if m["role"] == "tool")
    [ref] = parse_memory_refs(tool_message["content"])
    assert ref.tokens > 20_000 and len(tool_message["content"]) < 8_000
    assert await store.retrieve(ref.key, user_id=user_id) == output
    # The follow-up question about the file expanded the matching lines for that turn.
    last = json.dumps(model.requests[2]["messages"])
    assert "Memory expansion" in last and "checksum mismatch in artifact_store.py" in last
    # Only the leading message is a system message: the expansion reaches the model as a user message.
    roles = [m["role"] for m in model.requests[2]["messages"]]
    assert roles[0] == "system" and "system" not in roles[1:]


async def test_notes_can_stay_system_messages_for_models_that_take_several(store: MemoryStore, user_id: str) -> None:
    ctx = MemoryContext(store=store, user_id=user_id, notes_after_conversation_start="system", keep_recent_full=0)
    await add_tool_turn(ctx, "c0", big_log("job", marker="ERROR E7001 in billing_sync.py", n=400))
    await ctx.add_message(UserMessage(content="Why did billing_sync.py fail?", source="user"))
    messages = await ctx.get_messages()
    assert isinstance(messages[-1], SystemMessage) and "Memory expansion" in messages[-1].content


def is_memory_note(message: object) -> bool:
    """A note of the context after the conversation started: a user message from ``memory`` (the default role,
    which every model accepts there)."""
    return isinstance(message, UserMessage) and message.source == "memory"
