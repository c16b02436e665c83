"""The skills hook: plugs procedural memory (:mod:`agent_memory.skills`) into every AgentBuilder.

:class:`SkillsHook` is registered with :func:`~agent_memory.agents._builder.register_builder_hook` when this module is
imported (the agents wing's face imports it); the builder never imports it. When procedural memory is enabled
(``AGENT_MEMORY_SKILLS_ENABLED=true``, or :class:`SkillsAgentBuilder`'s ``procedural_memory=``):

* the coder gets the skill tools, the skills prompt and :class:`~agent_memory.skills.SkillHints` (matching skills
  listed before its first model call of a user turn);
* skills run in the team's own code executor (handed to the skills wing, which never imports agents);
* after each run, with ``learn_from_runs`` on, :func:`~agent_memory.skills.learn_from_run` turns a fixed failure
  into a lesson and the code that worked into a skill proposal.

Disabled (the default) the team is exactly what it was.

Example:
    >>> from agent_memory.skills import ProceduralMemorySettings
    >>> settings = ProceduralMemorySettings(enabled=True)
    >>> builder = SkillsAgentBuilder(store, "alice", procedural_memory=settings)  # doctest: +SKIP
    >>> session = await builder.build(thread_id="t1")  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from typing import Any

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import BaseChatMessage
from autogen_core.code_executor import CodeExecutor
from autogen_core.memory import Memory
from autogen_core.tools import BaseTool

from ..skills import (
    HINT_HEADER,
    LearnedFromRun,
    ProceduralMemory,
    ProceduralMemorySettings,
    SkillHints,
    fix_description,
    learn_from_run,
    skill_tools,
    skills_system_message,
)
from ..store import MemoryStore
from ._builder import AgentBuilder, AgentSession, BuilderHook, register_builder_hook
from ._executor import LocalProcessGroupExecutor
from ._spec import TeamSpec

log = logging.getLogger(__name__)

__all__ = ["HINT_HEADER", "SkillHints", "SkillsAgentBuilder", "SkillsHook", "fix_description", "learn_from_run"]


def skills_of(builder: AgentBuilder, agent_name: str, thread_id: str) -> ProceduralMemory | None:
    """The builder's procedural memory for this agent and thread, or None when it is disabled.

    Settings: ``builder.procedural_memory_settings`` when set (see :class:`SkillsAgentBuilder`), else the
    environment (``AGENT_MEMORY_SKILLS_*``). Skills run in the thread's work directory (where the user's files
    are) until the team's own executor is handed in.
    """
    settings: ProceduralMemorySettings | None = getattr(builder, "procedural_memory_settings", None)
    settings = settings or ProceduralMemorySettings()
    if not settings.enabled:
        return None
    cache: dict[tuple[str, str], ProceduralMemory] = builder.__dict__.setdefault("_procedural_memories", {})
    key = (agent_name, thread_id)
    if key not in cache:
        timeout = builder.spec.executor.timeout_seconds
        # The memory model (if configured) may generalise captured skills' parameters; none: deterministic only.
        cache[key] = ProceduralMemory(
            builder.store, user_id=builder.user_id, agent_id=agent_name,
            settings=settings.model_copy(update={"execution_timeout": timeout}),
            # The same sandbox as the team's code: this user's uid, limits and network setting.
            executor=LocalProcessGroupExecutor(
                timeout=timeout, work_dir=builder.work_dir(thread_id), sandbox=builder.spec.executor.sandbox_policy(),
                owner=builder.user_id, home=builder.home,
            ),
            model_client=builder.build_memory_model_client(),
        )  # fmt: skip
    return cache[key]


class SkillsHook(BuilderHook):
    """Procedural memory for every AgentBuilder (does nothing while it is disabled)."""

    def code_agent_parts(
        self, builder: AgentBuilder, agent_name: str, thread_id: str, tools: list[BaseTool[Any, Any]], prompt: str
    ) -> tuple[list[BaseTool[Any, Any]], str]:
        memory = skills_of(builder, agent_name, thread_id)
        if memory is None:
            return tools, prompt
        return [*tools, *skill_tools(memory)], f"{prompt.rstrip()}\n{skills_system_message(memory.settings)}\n"

    def code_agent_memory(self, builder: AgentBuilder, agent_name: str, thread_id: str) -> list[Memory]:
        memory = skills_of(builder, agent_name, thread_id)
        return [SkillHints(memory)] if memory is not None else []

    def executor_ready(self, builder: AgentBuilder, agent_name: str, thread_id: str, executor: CodeExecutor) -> None:
        """Skills of this agent and thread run in the team's own code executor (Docker included), not a second one."""
        cache: dict[tuple[str, str], ProceduralMemory] = builder.__dict__.get("_procedural_memories", {})
        memory = cache.get((agent_name, thread_id))
        if memory is not None:
            memory.use_executor(executor)

    async def after_run(self, session: AgentSession, task: str | BaseChatMessage, result: TaskResult) -> None:
        await learn_after_run(session, task, result)


async def learn_after_run(session: AgentSession, task: object, result: TaskResult) -> LearnedFromRun | None:
    """:func:`learn_from_run` when the session's coder has procedural memory with ``learn_from_runs`` on."""
    hints = [m for m in (getattr(session.code_agent, "_memory", None) or []) if isinstance(m, SkillHints)]
    if not hints or not hints[0].memory.settings.learn_from_runs or not isinstance(task, str):
        return None
    try:
        return await learn_from_run(hints[0].memory, task, result.messages, coder=session.code_agent.name)
    except Exception:  # never let learning break the chat
        log.exception("learning from the run failed")
        return None


class SkillsAgentBuilder(AgentBuilder):
    """AgentBuilder with explicit procedural-memory settings (instead of ``AGENT_MEMORY_SKILLS_*``).

    The skills themselves come from :class:`SkillsHook`, which every AgentBuilder runs.
    """

    def __init__(
        self,
        store: MemoryStore,
        user_id: str,
        *,
        procedural_memory: ProceduralMemorySettings | None = None,
        spec: TeamSpec | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(store, user_id, spec=spec, **kwargs)
        self.procedural_memory_settings = procedural_memory or ProceduralMemorySettings()

    def procedural_memory(self, agent_name: str, thread_id: str) -> ProceduralMemory | None:
        return skills_of(self, agent_name, thread_id)


register_builder_hook(SkillsHook())
