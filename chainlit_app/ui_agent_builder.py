"""UIAgentBuilder: the agents' builder for the chat UI, one per chat session (user and thread).

:class:`UIAgentBuilder` is an :class:`~agent_memory.agents.AgentBuilder` bound to one Chainlit session: the
logged-in user and the current thread. Its :meth:`~UIAgentBuilder.build_model_context` gives the CodeAgent a
:class:`~agent_memory.MemoryContext` for exactly that user and thread, restored from the state saved in
PostgreSQL, so a resumed thread continues with its placeholders intact. The UI also streams the model's
tokens, so the team spec is the default one with streaming switched on (or ``AGENT_MEMORY_UI_TEAM_SPEC``:
a spec file or the name of a row in the ``agents`` table).

Example:
    >>> async def on_chat_start(store, user, thread_id):            # doctest: +SKIP
    ...     builder = await UIAgentBuilder.for_session(store, user_id=user, thread_id=thread_id)
    ...     agents = await builder.build_session()
    ...     async for event in agents.run_stream("list the files here"):
    ...         ...
"""

from __future__ import annotations

import os
from typing import Any

from autogen_core.model_context import ChatCompletionContext

from agent_memory import MemoryStore
from agent_memory.agents import AgentBuilder, AgentSession, ModelConfigError, TeamSpec, load_model_client
from agent_memory.validation import check_identifier
from chainlit_app.runtime import executor_shards, get_executor_runtime


def model_setup_problem() -> str | None:
    """``None`` when a model client can be built from the environment, else what to set (markdown)."""
    try:
        load_model_client()
    except ModelConfigError as exc:
        return (
            "**No model is configured, so the agents cannot run yet.**\n\n"
            f"```text\n{exc}\n```\n\n"
            "Set it in the environment of `agent-memory ui` and restart it. The memory inspector and the "
            "**Memories** / **Search** commands work without a model."
        )
    return None


def streaming(spec: TeamSpec) -> TeamSpec:
    """``spec`` with the CodeAgent's token streaming on (the UI shows the model writing)."""
    return spec.model_copy(update={"code_agent": spec.code_agent.model_copy(update={"model_client_stream": True})})


class UIAgentBuilder(AgentBuilder):
    """An AgentBuilder for one Chainlit session: ``user_id`` is the logged-in user, ``thread_id`` the thread.

    Args:
        store: the UI process's memory store.
        user_id: the identifier of the logged-in Chainlit user (never taken from the request).
        thread_id: the Chainlit thread (``cl.context.session.thread_id``); memories and the saved context
            state are keyed by it.
        **kwargs: passed to :class:`AgentBuilder` (``spec``, ``model_client``, ``home``, ``runtime``...).
    """

    def __init__(self, store: MemoryStore, user_id: str, *, thread_id: str, **kwargs: Any) -> None:
        super().__init__(store, user_id, **kwargs)
        checked = check_identifier(thread_id, "thread_id")
        assert checked is not None
        self.thread_id = checked

    @classmethod
    async def for_session(cls, store: MemoryStore, *, user_id: str, thread_id: str, **kwargs: Any) -> UIAgentBuilder:
        """A builder with the UI's team spec (``AGENT_MEMORY_UI_TEAM_SPEC`` or the default, streaming on), whose
        code runs on the executor workers of ``AGENT_MEMORY_RUNTIME`` when it is set."""
        if "spec" not in kwargs:
            kwargs["spec"] = streaming(await AgentBuilder.load_spec(store, os.environ.get("AGENT_MEMORY_UI_TEAM_SPEC")))
        if "executor_runtime" not in kwargs:
            kwargs["executor_runtime"] = await get_executor_runtime()
            kwargs.setdefault("executor_shards", executor_shards())
        return cls(store, user_id, thread_id=thread_id, **kwargs)

    async def build_model_context(
        self, *, agent_name: str, thread_id: str, reserved_tokens: int
    ) -> ChatCompletionContext:
        """The base builder's MemoryContext (logged-in user, restored from PostgreSQL), for this thread only."""
        if thread_id != self.thread_id:
            raise ValueError(f"this builder serves thread {self.thread_id!r}, not {thread_id!r}")
        return await super().build_model_context(
            agent_name=agent_name, thread_id=thread_id, reserved_tokens=reserved_tokens
        )

    async def build_session(self) -> AgentSession:
        """The CodeAgent + executor team of this user and thread."""
        return await self.build(self.thread_id)
