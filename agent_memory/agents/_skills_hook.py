"""Procedural memory for the CodeAgent team: the builder hook and capture from a finished run.

* :func:`procedural_memory_for` — a :class:`~agent_memory.skills.ProceduralMemory` for one user, agent and thread
  (skills run in the thread's work directory, where the user's files are), or None when disabled.
* :func:`add_procedural_memory` — the hook ``AgentBuilder.build_code_agent`` calls: when procedural memory is
  enabled (``AGENT_MEMORY_SKILLS_ENABLED=true``, or :class:`SkillsAgentBuilder`'s ``procedural_memory=``) the coder
  gets the skill tools and the skills prompt; disabled (the default) the team is exactly what it was.
* :class:`SkillHints` — an AutoGen ``Memory`` on the coder: matching skills and lessons are listed before its first
  model call of a user turn, so a repeated task goes straight to ``use_skill``.
* :func:`learn_from_run` — capture from a finished run: a failure that was then fixed becomes a lesson, the code
  that worked a skill proposal (pending approval). ``AgentSession`` calls it after each run through
  :func:`learn_after_run` when ``learn_from_runs`` is on (``AGENT_MEMORY_SKILLS_LEARN_FROM_RUNS=true``).

Example:
    >>> from agent_memory.skills._procedural import ProceduralMemorySettings
    >>> from agent_memory.agents._skills_hook import SkillsAgentBuilder
    >>> settings = ProceduralMemorySettings(enabled=True)
    >>> builder = SkillsAgentBuilder(store, "alice", procedural_memory=settings)  # doctest: +SKIP
    >>> session = await builder.build(thread_id="t1")  # doctest: +SKIP
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import (
    BaseAgentEvent,
    BaseChatMessage,
    CodeExecutionEvent,
    TextMessage,
    ToolCallRequestEvent,
)
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeExecutor
from autogen_core.memory import Memory, MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import ChatCompletionClient, SystemMessage, UserMessage
from autogen_core.tools import BaseTool
from pydantic import BaseModel

from ..skills import (
    ProceduralMemory,
    ProceduralMemorySettings,
    RegisterResult,
    SkillError,
    SkillSearchResult,
    SkillStatus,
    skill_tools,
    skills_system_message,
)
from ..store import MemoryStore
from ._builder import AgentBuilder
from ._spec import TeamSpec

log = logging.getLogger(__name__)
_PY_BLOCK = re.compile(r"```[ \t]*(?:python|py)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def procedural_memory_for(
    store: MemoryStore,
    user_id: str,
    agent_id: str,
    *,
    work_dir: Path | None,
    settings: ProceduralMemorySettings | None = None,
    model_client: ChatCompletionClient | None = None,
) -> ProceduralMemory | None:
    """The agent's procedural memory, or None when it is disabled (then nothing about the agent changes)."""
    settings = settings or ProceduralMemorySettings()
    if not settings.enabled:
        return None
    return ProceduralMemory(store, user_id=user_id, agent_id=agent_id, settings=settings, work_dir=work_dir,
                            model_client=model_client)  # fmt: skip


def add_procedural_memory(
    builder: AgentBuilder, agent_name: str, thread_id: str, tools: list[BaseTool[Any, Any]], prompt: str
) -> tuple[list[BaseTool[Any, Any]], str]:
    """The hook :meth:`AgentBuilder.build_code_agent` calls: the coder's tools and prompt, plus skills if enabled.

    Settings: ``builder.procedural_memory_settings`` when set (see :class:`SkillsAgentBuilder`), else the
    environment (``AGENT_MEMORY_SKILLS_*``). Disabled: ``tools`` and ``prompt`` come back unchanged.
    """
    memory = skills_of(builder, agent_name, thread_id)
    if memory is None:
        return tools, prompt
    return [*tools, *skill_tools(memory)], f"{prompt.rstrip()}\n{skills_system_message(memory.settings)}\n"


def skills_of(builder: AgentBuilder, agent_name: str, thread_id: str) -> ProceduralMemory | None:
    """The builder's procedural memory for this agent and thread (skills run in the thread's work directory)."""
    settings: ProceduralMemorySettings | None = getattr(builder, "procedural_memory_settings", None)
    settings = settings or ProceduralMemorySettings()
    if not settings.enabled:
        return None
    cache: dict[tuple[str, str], ProceduralMemory] = builder.__dict__.setdefault("_procedural_memories", {})
    key = (agent_name, thread_id)
    if key not in cache:
        settings = settings.model_copy(update={"execution_timeout": builder.spec.executor.timeout_seconds})
        # The memory model (if configured) may generalise captured skills' parameters; none: deterministic only.
        memory = procedural_memory_for(builder.store, builder.user_id, agent_name, work_dir=builder.work_dir(thread_id),
                                       settings=settings, model_client=builder.build_memory_model_client())  # fmt: skip
        assert memory is not None
        cache[key] = memory
    return cache[key]


def attach_executor(builder: AgentBuilder, agent_name: str, thread_id: str, executor: CodeExecutor) -> None:
    """Skills of this agent and thread run in the team's own code executor (Docker included), not a second one."""
    cache: dict[tuple[str, str], ProceduralMemory] = builder.__dict__.get("_procedural_memories", {})
    memory = cache.get((agent_name, thread_id))
    if memory is not None:
        memory.use_executor(executor)


class SkillsAgentBuilder(AgentBuilder):
    """AgentBuilder with explicit procedural-memory settings (instead of ``AGENT_MEMORY_SKILLS_*``).

    The skills themselves come from :meth:`AgentBuilder.build_code_agent`'s hook, :func:`add_procedural_memory`.
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


HINT_HEADER = "Learned skills that match this request (call use_skill directly; no need to search):"
LESSON_HEADER = "Lessons from past failures on similar tasks (follow them):"


class SkillHintsConfig(BaseModel):
    """Configuration of :class:`SkillHints` (informational: the component holds a live store)."""

    user_id: str
    agent_id: str
    limit: int = 3


class SkillHints(Memory):
    """AutoGen ``Memory`` that puts matching skills and lessons in front of the model when a user asks something.

    Before the agent's first model call of a turn, AgentChat calls :meth:`update_context`; when the newest message is
    the user's (not the executor's output), the user's words are searched against this agent's skills and lessons
    (deterministic: full-text + trigram, no model) and, if anything matches, one system note lists them. The model
    can then call ``use_skill`` at once instead of ``search_skills`` first: one request fewer per reuse (seed 004,
    context injection). Nothing matches: nothing is added.

    Example:
        >>> hints = [SkillHints(skills)]  # doctest: +SKIP
        >>> agent = AssistantAgent("coder", client, tools=skill_tools(skills), memory=hints)  # doctest: +SKIP
    """

    component_type = "memory"
    component_config_schema = SkillHintsConfig

    def __init__(self, memory: ProceduralMemory, *, limit: int = 3) -> None:
        self.memory = memory
        self.limit = limit

    async def hint(self, text: str) -> tuple[str, list[MemoryContent]]:
        """The note for ``text`` ("" when nothing matches) and what it lists."""
        skills = await self.memory.search_skills(text, limit=self.limit)
        lessons = await self.memory.recall_lessons(text, limit=self.limit)
        if not skills and not lessons:
            return "", []
        parts: list[str] = []
        if skills:
            listing = SkillSearchResult(skills=[s.summary() for s in skills]).render().split("\n", 1)[1]
            parts += [HINT_HEADER, listing]
        if lessons:
            parts += [LESSON_HEADER, *(lesson.render() for lesson in lessons)]
        contents = [
            MemoryContent(content=s.name, mime_type=MemoryMimeType.TEXT,
                          metadata={"kind": "skill", "relevance": s.relevance, "version": s.version})
            for s in skills
        ] + [
            MemoryContent(content=lesson.key, mime_type=MemoryMimeType.TEXT, metadata={"kind": "lesson"})
            for lesson in lessons
        ]  # fmt: skip
        return "\n".join(parts), contents

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        messages = await model_context.get_messages()
        last = messages[-1] if messages else None
        if not (isinstance(last, UserMessage) and last.source == "user" and isinstance(last.content, str)):
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        note, contents = await self.hint(last.content)
        if not note or any(isinstance(m, SystemMessage) and m.content == note for m in messages):
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        await model_context.add_message(SystemMessage(content=note))
        return UpdateContextResult(memories=MemoryQueryResult(results=contents))

    async def query(
        self, query: str | MemoryContent, cancellation_token: CancellationToken | None = None, **kwargs: Any
    ) -> MemoryQueryResult:
        text = query if isinstance(query, str) else str(query.content)
        return MemoryQueryResult(results=(await self.hint(text))[1])

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        raise NotImplementedError("skills are added with register_skill / ProceduralMemory.register_skill")

    async def clear(self) -> None:
        raise NotImplementedError("skills are removed with ProceduralMemory.delete / prune")

    async def close(self) -> None:
        return None

    def _to_config(self) -> SkillHintsConfig:
        return SkillHintsConfig(user_id=self.memory.user_id, agent_id=self.memory.agent_id, limit=self.limit)

    @classmethod
    def _from_config(cls, config: SkillHintsConfig) -> SkillHints:
        raise NotImplementedError(
            "SkillHints needs a live ProceduralMemory; build it with skill_hints_for(builder, ...)"
        )


def skill_hints_for(builder: AgentBuilder, agent_name: str, thread_id: str) -> list[Memory] | None:
    """The CodeAgent's ``memory=``: :class:`SkillHints` when procedural memory is enabled, else None."""
    memory = skills_of(builder, agent_name, thread_id)
    return [SkillHints(memory)] if memory is not None else None


def _python_runs(messages: Sequence[BaseAgentEvent | BaseChatMessage], coder: str) -> list[tuple[str, bool, str]]:
    """(code, succeeded, executor text) for each coder message with Python blocks that the executor ran."""
    runs: list[tuple[str, bool, str]] = []
    pending: str | None = None
    for message in messages:
        if isinstance(message, TextMessage) and message.source == coder:
            blocks = _PY_BLOCK.findall(message.content)
            pending = "\n\n".join(b.strip() + "\n" for b in blocks) if blocks else None
        elif isinstance(message, CodeExecutionEvent) and pending is not None:
            runs.append((pending, message.result.exit_code == 0, message.result.output))
            pending = None
    return runs


def fix_description(failed: str, fixed: str, limit: int = 3) -> str:
    """What changed between code that failed and code that worked, as "use X instead of Y" (deterministic)."""
    removed: list[str] = []
    added: list[str] = []
    for line in difflib.unified_diff(failed.splitlines(), fixed.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        text = line[1:].strip()
        if not text or text.startswith("#"):
            continue
        (removed if line.startswith("-") else added).append(text)
    if not added and not removed:
        return "run the same code again (it failed once, then worked)"
    parts = []
    if added:
        parts.append("use " + "; ".join(f"`{a[:120]}`" for a in added[:limit]))
    if removed:
        parts.append("instead of " + "; ".join(f"`{r[:120]}`" for r in removed[:limit]))
    return " ".join(parts)


class LearnedFromRun(BaseModel):
    """What :func:`learn_from_run` stored."""

    skill: RegisterResult | None = None
    lessons: list[str] = []


async def learn_from_run(
    memory: ProceduralMemory | None,
    task: str,
    messages: Sequence[BaseAgentEvent | BaseChatMessage],
    *,
    coder: str = "coder",
    skill_status: SkillStatus | None = "pending_approval",
) -> LearnedFromRun:
    """Capture from a finished run (seed 004, hybrid capture), deterministically:

    * each failed Python run followed by a successful one becomes a lesson: when ``task``, error -> the change
      that fixed it (:func:`fix_description`);
    * the last Python code that worked is proposed as a skill (``skill_status``, pending approval by default),
      unless the agent already called ``register_skill`` or agents may not register skills.

    Nothing happens when procedural memory is off (``memory`` None or disabled).
    """
    learned = LearnedFromRun()
    if memory is None or not memory.settings.enabled:
        return learned
    runs = _python_runs(messages, coder)
    for i, (code, ok, output) in enumerate(runs):
        if ok or i + 1 >= len(runs):
            continue
        fixed = next((c for c, later_ok, _ in runs[i + 1 :] if later_ok), None)
        if fixed is not None:
            learned.lessons.append(await memory.record_failure_lesson(task, output, fix_description(code, fixed)))
    registered = any(
        isinstance(m, ToolCallRequestEvent) and any(c.name == "register_skill" for c in m.content) for m in messages
    )
    working = [c for c, ok, _ in runs if ok]
    if working and not registered and memory.settings.auto_register_skills:
        draft = await memory.propose_skill_from_success(task, working[-1])
        try:
            learned.skill = await memory.register_draft(draft, status=skill_status)
        except SkillError as exc:  # e.g. the skill limit: learning is best effort, the run already succeeded
            log.info("captured skill %r not registered: %s", draft.name, exc)
    return learned


async def learn_after_run(session: Any, task: object, result: TaskResult) -> LearnedFromRun | None:
    """AgentSession's post-run hook: :func:`learn_from_run` when ``learn_from_runs`` is on (else nothing)."""
    hints = [m for m in (getattr(session.code_agent, "_memory", None) or []) if isinstance(m, SkillHints)]
    if not hints or not hints[0].memory.settings.learn_from_runs or not isinstance(task, str):
        return None
    try:
        return await learn_from_run(hints[0].memory, task, result.messages, coder=session.code_agent.name)
    except Exception:  # never let learning break the chat
        log.exception("learning from the run failed")
        return None
