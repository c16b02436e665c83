"""SkillHints: an AutoGen ``Memory`` that lists matching skills and lessons before the agent's first model call.

A repeated task then goes straight to ``use_skill`` (one model request fewer than searching first). Searching is
deterministic (full-text + trigram + name match, dense only when an embedder is configured); nothing matches:
nothing is added.

Example:
    >>> HINT_HEADER.startswith("Learned skills")
    True
"""

from __future__ import annotations

from typing import Any

from autogen_core import CancellationToken
from autogen_core.memory import Memory, MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import SystemMessage, UserMessage
from pydantic import BaseModel

from ._procedural import ProceduralMemory
from ._tools import SkillSearchResult

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
    can then call ``use_skill`` at once instead of ``search_skills`` first: one request fewer per reuse (context
    injection). Nothing matches: nothing is added.

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
            "SkillHints needs a live ProceduralMemory; build it with SkillHints(procedural_memory)"
        )
