"""CodeAgent: an AgentChat assistant that writes Python/shell code and works with memory placeholders.

It is an :class:`autogen_agentchat.agents.AssistantAgent` with

* a system prompt that teaches the ``[MemoryRef: <key> - <description> - <N> tokens]`` convention: stored
  content is not shown in full, read it with ``retrieve_memory`` (grep / line range /
  head / tail), find earlier things with ``search_memory``, keep facts with ``store_memory``;
* the memory tools bound to the user (``agent_memory.tools.memory_tools``), unless tools are given;
* ``model_context=`` for any ``ChatCompletionContext`` — typically a ``MemoryContext``. The system message
  is kept by the agent itself and sent first on every call, whatever the context holds (AssistantAgent
  passes system messages separately from the context; tests check what the model server receives).

For models that accept only one, leading system message (``model_info["multiple_system_messages"]`` false,
the default for local models), system notes a context inserts later in the conversation (e.g. recalled
user preferences) are sent as user messages marked ``[system note]`` instead of failing the request.

Example:
    >>> from agent_memory.agents import CodeAgent
    >>> agent = CodeAgent("coder", model_client, store=store, user_id="alice",  # doctest: +SKIP
    ...                   model_context=MemoryContext(store=store, user_id="alice"))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_core.memory import Memory
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import ChatCompletionClient, LLMMessage, SystemMessage, UserMessage
from autogen_core.tools import BaseTool

from ..store import MemoryStore
from ..tools import memory_tools

CODE_AGENT_SYSTEM_MESSAGE = """\
You are a careful software engineer. You solve tasks by writing code that the executor agent runs for you.

How to work:
- To run something, reply with exactly one fenced code block: ```bash for shell commands, ```python for Python.
  The executor runs it in a private working directory and replies with the exit status and the output.
  Never ask the user to run code for you.
- Read the exit status. If the code failed or timed out, read the error, fix the code and run it again.
- When the task is done, reply with the final answer in plain words (no code block) and end with TERMINATE.

Memory and [MemoryRef: ...] placeholders:
- Large outputs, files and pastes are not shown to you in full. They appear as
  [MemoryRef: <key> - <description> - <N> tokens], usually followed by a short excerpt. The exact, complete
  content is stored under <key> and nothing is lost.
- Do not guess what stored content says and do not re-run a command only to see its output again. Read the
  part you need with retrieve_memory(key=..., grep="<regex>") or lines="START-END", head=N, tail=N. Prefer
  grep or a line range over reading everything.
- To find something from earlier (past outputs, the user's preferences and facts), call search_memory(query).
- Keep facts worth remembering with store_memory(content, description, memory_type) using memory_type
  user_preference, user_fact or note; start the description with its subject ("deploy target: canary").
- When the user corrects something you remembered, or a stored preference or fact is no longer true, fix it
  with update_memory(key, content=..., description=...) instead of storing a second, contradicting memory.
- Copy keys exactly as written; never invent a key. Cite a placeholder instead of pasting large content.
"""

CODE_AGENT_DESCRIPTION = (
    "A software engineer that writes python and bash code for the executor to run, reads stored outputs "
    "with the memory tools, and gives the final answer followed by TERMINATE."
)


class CodeAgent(AssistantAgent):
    """Writes code for the executor; reads ``[MemoryRef: ...]`` content through the memory tools.

    Args:
        name: agent name.
        model_client: any AutoGen ``ChatCompletionClient`` (see :mod:`agent_memory.agents`).
        model_context: the context (a ``MemoryContext`` for memory-backed agents).
        store / user_id / thread_id: when ``tools`` is None, the memory tools are built for this user.
        tools: explicit tools (replaces the memory tools; pass ``memory_tools(...) + mine`` to add some).
        system_message: replaces :data:`CODE_AGENT_SYSTEM_MESSAGE`; ``extra_instructions`` appends to it.
        max_tool_iterations: memory look-ups the agent may chain before it must answer.
        memory: AutoGen ``Memory`` objects consulted before each turn (e.g. learned-skill hints).
    """

    def __init__(
        self,
        name: str,
        model_client: ChatCompletionClient,
        *,
        model_context: ChatCompletionContext | None = None,
        store: MemoryStore | None = None,
        user_id: str | None = None,
        thread_id: str | None = None,
        tools: Sequence[BaseTool[Any, Any]] | None = None,
        system_message: str | None = None,
        extra_instructions: str | None = None,
        description: str = CODE_AGENT_DESCRIPTION,
        max_tool_iterations: int = 8,
        model_client_stream: bool = False,
        memory: Sequence[Memory] | None = None,
    ) -> None:
        if tools is None:
            if store is None or user_id is None:
                raise ValueError("CodeAgent needs store= and user_id= to build its memory tools (or pass tools=)")
            tools = memory_tools(store, user_id, agent_id=name, thread_id=thread_id)
        prompt = system_message if system_message is not None else CODE_AGENT_SYSTEM_MESSAGE
        if extra_instructions:
            prompt = f"{prompt.rstrip()}\n\n{extra_instructions.strip()}\n"
        super().__init__(
            name,
            model_client,
            tools=list(tools),
            model_context=model_context,
            description=description,
            system_message=prompt,
            model_client_stream=model_client_stream,
            reflect_on_tool_use=True,
            max_tool_iterations=max_tool_iterations,
            memory=list(memory) if memory else None,
        )

    @property
    def system_message(self) -> str:
        """The system prompt sent first on every model call."""
        content = self._system_messages[0].content if self._system_messages else ""
        return content if isinstance(content, str) else ""

    @property
    def tools(self) -> list[BaseTool[Any, Any]]:
        return list(self._tools)

    @staticmethod
    def _get_compatible_context(model_client: ChatCompletionClient, messages: list[LLMMessage]) -> Sequence[LLMMessage]:
        compatible = list(AssistantAgent._get_compatible_context(model_client, messages))
        if model_client.model_info.get("multiple_system_messages", False):
            return compatible
        # Keep the leading run of system messages (AutoGen merges it); later ones become marked user notes.
        out: list[LLMMessage] = []
        leading = True
        for message in compatible:
            if isinstance(message, SystemMessage):
                if leading:
                    out.append(message)
                    continue
                out.append(UserMessage(content=f"[system note] {message.content}", source="system"))
                continue
            leading = False
            out.append(message)
        return out
