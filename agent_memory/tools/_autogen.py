"""The memory tools as AutoGen tools, bound to one user: ``memory_tools(store, user_id, ...)``.

Each tool is an :class:`autogen_core.tools.FunctionTool` over the same :class:`MemoryToolbox` method the
MCP server exposes. The user (and agent/thread) is fixed when the tools are built: no argument the model
can write names a user. Tools return the toolbox's Pydantic results (``run_json`` gives the model object);
what the model reads is the compact text rendering (``return_value_as_string``), not escaped JSON.

Example:
    >>> from autogen_agentchat.agents import AssistantAgent
    >>> from agent_memory.tools import memory_tools
    >>> tools = memory_tools(store, "alice", thread_id="t1")  # doctest: +SKIP
    >>> agent = AssistantAgent("coder", model_client=client, tools=tools)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from autogen_core.tools import FunctionTool

from ..store import MemoryStore
from ._editing import UpdateResult
from ._toolbox import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_STORE_BYTES,
    ListResult,
    MemoryToolbox,
    RetrieveResult,
    SearchResult,
    StoreResult,
)

MEMORY_TOOL_NAMES = frozenset({"retrieve_memory", "search_memory", "store_memory", "list_memories", "update_memory"})
"""Names of these tools. Their results are already views of the store (capped, with a "how to read on" hint):
a MemoryContext should not offload them again, or it stores duplicates and hides what the model asked for."""

RETRIEVE_DESCRIPTION = (
    "Read stored content by its memory key (the <key> in [MemoryRef: <key> - <description> - <N> tokens]). "
    "Prefer a view over the full text: grep='regex' returns matching lines as 'N:line' (context=K adds K "
    "lines around each match; ignore_case=true), lines='100-200' returns a 1-based line range, head=N / "
    "tail=N the first / last N lines. Options apply in the order lines, grep, head/tail. Long results are "
    "cut and say how to read on."
)
SEARCH_DESCRIPTION = (
    "Search this user's stored memories (command outputs, notes, preferences, facts) by words, identifiers "
    "or error text. Returns keys with descriptions and sizes, best first; read one with retrieve_memory."
)
STORE_DESCRIPTION = (
    "Store text exactly in long-term memory for this user and get back a key and a [MemoryRef: ...] "
    "placeholder to cite instead of repeating the text. Use for facts, preferences, results and notes worth "
    "keeping. memory_type: note, user_preference, user_fact, lesson, command_output, ..."
)
UPDATE_DESCRIPTION = (
    "Correct a stored memory in place when what it says is wrong or out of date (the user corrects you, a "
    "preference or fact changed): give its key and the new content and/or description. The key stays the same "
    "and the old version is kept in its history. For a new preference or fact on the same subject, store_memory "
    "with the same description prefix (e.g. 'deploy target: ...') also replaces the old one."
)
LIST_DESCRIPTION = (
    "List this user's stored memories, newest first, optionally only one memory_type, thread or agent, or "
    "those created since an ISO time or a relative age such as '24h' or '7d'."
)


class MemoryFunctionTool(FunctionTool):
    """A FunctionTool whose result the model reads as the result's ``render()`` text rather than JSON."""

    def return_value_as_string(self, value: Any) -> str:
        render: Callable[[], str] | None = getattr(value, "render", None)
        if callable(render):
            return render()
        return super().return_value_as_string(value)


def memory_tools(
    store: MemoryStore,
    user_id: str,
    agent_id: str | None = None,
    thread_id: str | None = None,
    *,
    include_list: bool = True,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_store_bytes: int = DEFAULT_MAX_STORE_BYTES,
) -> list[FunctionTool]:
    """``retrieve_memory``, ``search_memory``, ``store_memory`` (and ``list_memories``) for ``user_id``."""
    return tools_from_toolbox(
        MemoryToolbox(
            store, user_id, agent_id, thread_id, max_chars=max_chars, max_store_bytes=max_store_bytes, source="tool"
        ),
        include_list=include_list,
    )


def tools_from_toolbox(toolbox: MemoryToolbox, *, include_list: bool = True) -> list[FunctionTool]:
    """The AutoGen tools of an existing toolbox (share one toolbox between several tool lists)."""

    async def retrieve_memory(
        key: Annotated[str, "memory key, e.g. cmd_1a2b3c4d5e6f"],
        grep: Annotated[str | None, "regular expression; only matching lines (N:line)"] = None,
        lines: Annotated[str | None, "1-based inclusive line range START-END, e.g. '100-200'"] = None,
        head: Annotated[int | None, "only the first N lines"] = None,
        tail: Annotated[int | None, "only the last N lines"] = None,
        context: Annotated[int, "lines of context around each grep match (0-100)"] = 0,
        ignore_case: Annotated[bool, "case-insensitive grep"] = False,
    ) -> RetrieveResult:
        return await toolbox.retrieve_memory(
            key, head=head, tail=tail, lines=lines, grep=grep, context=context, ignore_case=ignore_case
        )

    async def search_memory(
        query: Annotated[str, "words, identifiers or error text to look for"],
        limit: Annotated[int, "number of results (1-50)"] = 5,
        memory_type: Annotated[str | None, "only this type, e.g. command_output or user_preference"] = None,
    ) -> SearchResult:
        return await toolbox.search_memory(query, limit=limit, memory_type=memory_type)

    async def store_memory(
        content: Annotated[str, "the exact text to keep"],
        description: Annotated[str, "short description shown in the placeholder"],
        memory_type: Annotated[str, "note, user_preference, user_fact, lesson, command_output, ..."] = "note",
    ) -> StoreResult:
        return await toolbox.store_memory(content, description, memory_type)

    async def list_memories(
        memory_type: Annotated[str | None, "only this memory type"] = None,
        thread_id: Annotated[str | None, "only this thread"] = None,
        agent_id: Annotated[str | None, "only this agent"] = None,
        since: Annotated[str | None, "only created since: ISO date/time or age like '24h', '7d'"] = None,
        limit: Annotated[int, "maximum number of memories (1-500)"] = 20,
    ) -> ListResult:
        return await toolbox.list_memories(
            memory_type=memory_type, thread_id=thread_id, agent_id=agent_id, since=since, limit=limit
        )

    async def update_memory(
        key: Annotated[str, "memory key to correct, e.g. pref_1a2b3c4d5e6f"],
        content: Annotated[str | None, "the corrected text (None: keep the content)"] = None,
        description: Annotated[str | None, "the corrected description (None: keep it)"] = None,
    ) -> UpdateResult:
        return await toolbox.update_memory(key, content=content, description=description)

    tools: list[FunctionTool] = [
        MemoryFunctionTool(retrieve_memory, RETRIEVE_DESCRIPTION, name="retrieve_memory"),
        MemoryFunctionTool(search_memory, SEARCH_DESCRIPTION, name="search_memory"),
        MemoryFunctionTool(store_memory, STORE_DESCRIPTION, name="store_memory"),
        MemoryFunctionTool(update_memory, UPDATE_DESCRIPTION, name="update_memory"),
    ]
    if include_list:
        tools.append(MemoryFunctionTool(list_memories, LIST_DESCRIPTION, name="list_memories"))
    return tools
