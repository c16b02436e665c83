"""Prompt tokens per model call on the agents' end-to-end scenario, with and without agent-memory.

Scenario (the same as tests/test_agents_e2e.py): the user asks the team to run a program that prints
30,000 lines with one planted fact; the program really runs; the (scripted) model must answer with the fact.
The model is the scripted OpenAI-compatible server of tests/support/scripted_llm.py, reached over HTTP by
AutoGen's OpenAIChatCompletionClient; prompt tokens are counted with tiktoken on the request bodies the
server received (content + 4 per message + tool schemas, o200k encoding as for gpt-4o).

Variants:
  A. AutoGen baseline: AssistantAgent on UnboundedChatCompletionContext + CodeExecutorAgent posting the raw
     output; the model reads the fact from the raw output.
  B. MemoryContext only: same executor (raw output into the team), the coder's context is a MemoryContext
     (offloads it: placeholder + first-use excerpt); the model reads the fact with retrieve_memory(grep).
  C. agent-memory team (AgentBuilder): the executor stores the output itself and posts placeholder +
     excerpt + status; MemoryContext; the model reads the fact with retrieve_memory(grep).

Run:  python benchmarks/agent_bench.py [--lines 30000] [--json]
Uses AGENT_MEMORY_DATABASE_URL when set, else an embedded PostgreSQL under a temporary AGENT_MEMORY_HOME.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.scripted_llm import RecordedRequest, Reply, ScriptedLLM


def program(lines: int, fact: str) -> str:
    # The fact is spelled backwards in the code so that it can only reach the model through the output.
    return (
        f"for i in range(1, {lines + 1}):\n"
        f"    if i == {lines * 4 // 7}:\n"
        f"        print('config: DEPLOY_TOKEN=' + '{fact[::-1]}'[::-1])\n"
        "    else:\n"
        "        print(f'line {i:05d}: status ok checksum {i * 7919 % 100003:06d}')\n"
    )


def find_fact(text: str) -> str:
    match = re.search(r"DEPLOY_TOKEN=([\w-]+)", text)
    return match.group(1) if match else "NOT FOUND"


def answer_from_last_message(req: RecordedRequest) -> str:
    return f"The deploy token is {find_fact(req.contents()[-1])}. TERMINATE"


def answer_from_tool_result(req: RecordedRequest) -> str:
    tools = [m for m in req.messages if m.get("role") == "tool"]
    return f"The deploy token is {find_fact(str(tools[-1]['content']) if tools else '')}. TERMINATE"


def grep_last_ref(req: RecordedRequest) -> Reply:
    from agent_memory.placeholders import parse_memory_refs

    refs = [r for text in req.contents() for r in parse_memory_refs(text)]
    return Reply.tool_call("retrieve_memory", {"key": refs[-1].key, "grep": "DEPLOY_TOKEN"})


async def run_variant(name: str, lines: int, store: Any) -> dict[str, Any]:
    from autogen_agentchat.agents import CodeExecutorAgent
    from autogen_agentchat.conditions import TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core.model_context import UnboundedChatCompletionContext

    from agent_memory import MemoryContext
    from agent_memory.agents import CODE_AGENT_SYSTEM_MESSAGE, AgentBuilder, CodeAgent, LocalProcessGroupExecutor
    from agent_memory.tools import memory_tools

    fact = f"fact-{uuid.uuid4().hex[:8]}"
    user = f"bench-{uuid.uuid4().hex[:8]}"
    code_reply = f"```python\n{program(lines, fact)}```"
    task = f"Run a program that prints {lines} lines and tell me the deploy token."
    with ScriptedLLM() as llm, tempfile.TemporaryDirectory() as work:
        client = llm.model_client()
        started = time.perf_counter()
        if name == "C":
            llm.add(code_reply, grep_last_ref, answer_from_tool_result)
            session = await AgentBuilder(store, user, model_client=client, home=work).build()
            result = await session.run(task)
            await session.close()
        else:
            if name == "A":
                llm.add(code_reply, answer_from_last_message)
                context: Any = UnboundedChatCompletionContext()
                tools: list[Any] = []
            else:
                llm.add(code_reply, grep_last_ref, answer_from_tool_result)
                context = MemoryContext(store=store, user_id=user, agent_id="coder", thread_id=uuid.uuid4().hex)
                tools = list(memory_tools(store, user, agent_id="coder"))
            coder = CodeAgent(
                "coder", client, model_context=context, tools=tools, system_message=CODE_AGENT_SYSTEM_MESSAGE
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                executor = CodeExecutorAgent("executor", LocalProcessGroupExecutor(work_dir=work, timeout=120))
            team = RoundRobinGroupChat(
                [coder, executor], termination_condition=TextMentionTermination("TERMINATE", sources=["coder"])
            )
            result = await team.run(task=task)
        elapsed = time.perf_counter() - started
        final = result.messages[-1].to_text()
        return {
            "variant": name,
            "prompt_tokens_per_call": [r.prompt_tokens for r in llm.requests],
            "total_prompt_tokens": sum(r.prompt_tokens for r in llm.requests),
            "max_request_bytes": max(len(r.raw) for r in llm.requests),
            "answer_correct": fact in final,
            "server_errors": llm.errors,
            "seconds": round(elapsed, 2),
        }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=30_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not os.environ.get("AGENT_MEMORY_DATABASE_URL"):
        os.environ.setdefault("AGENT_MEMORY_HOME", tempfile.mkdtemp(prefix="am-bench-"))
    from agent_memory import MemoryStore

    store = await MemoryStore.open()
    try:
        results = [await run_variant(v, args.lines, store) for v in ("A", "B", "C")]
    finally:
        await store.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    labels = {
        "A": "AutoGen baseline (Unbounded context, raw output)",
        "B": "MemoryContext only (raw output offloaded by the context)",
        "C": "agent-memory team (executor stores, MemoryContext)",
    }
    print(f"Scenario: {args.lines} lines of output, one planted fact; prompt tokens per model call\n")
    print("| variant | prompt tokens per call | total | largest request | correct answer |")
    print("|---|---|---|---|---|")
    for r in results:
        per_call = " / ".join(f"{t:,}" for t in r["prompt_tokens_per_call"])
        print(
            f"| {labels[r['variant']]} | {per_call} | {r['total_prompt_tokens']:,} | "
            f"{r['max_request_bytes'] / 1024:,.0f} KiB | {'yes' if r['answer_correct'] else 'NO'} |"
        )
    base = results[0]["total_prompt_tokens"]
    for r in results[1:]:
        print(f"\n{r['variant']}: {100 * (1 - r['total_prompt_tokens'] / base):.1f}% fewer prompt tokens than A")


if __name__ == "__main__":
    asyncio.run(main())
