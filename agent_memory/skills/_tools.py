"""Skill tools for the CodeAgent: ``search_skills``, ``use_skill``, ``register_skill`` as AutoGen FunctionTools.

Gated by :class:`~agent_memory.skills.ProceduralMemorySettings`: with ``enabled=False`` (the default)
:func:`skill_tools` returns ``[]`` and :func:`skills_system_message` returns ``""``, so an agent built with them
is exactly the agent built without them. ``auto_register_skills=False`` leaves out
``register_skill`` (skills then come from operators: import, CLI).

The tools are bound to one :class:`~agent_memory.skills.ProceduralMemory` (one user and agent): no argument the
model writes can name a user or an agent. Errors (unknown skill, invalid parameters, pending approval) come back as
the tool's text, written for the model to act on. Results tell the model to say when a learned skill was used or
created, so the user knows where an answer came from.

Example:
    >>> from autogen_agentchat.agents import AssistantAgent
    >>> from agent_memory.skills import ProceduralMemory, ProceduralMemorySettings, skill_tools, skills_system_message
    >>> skills = ProceduralMemory(store, user_id="alice", agent_id="coder",  # doctest: +SKIP
    ...                           settings=ProceduralMemorySettings(enabled=True))
    >>> agent = AssistantAgent("coder", model_client=client, tools=skill_tools(skills),  # doctest: +SKIP
    ...                        system_message="You write Python." + skills_system_message(skills.settings))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

from autogen_core.tools import FunctionTool
from pydantic import BaseModel, Field

from ..errors import MemoryNotFound
from ._models import Lesson, ProceduralMemorySettings, RegisterResult, SkillError, SkillRun
from ._procedural import ProceduralMemory

SKILLS_PROMPT = """

Learned skills (code that worked before for this user):
- When the conversation lists learned skills that match the request, call use_skill directly. Otherwise, before
  writing code, call search_skills with a few words about the task. Follow the lessons they show.{prefer}
- If a skill fits, call use_skill instead of writing code and tell the user: I used the learned skill "<name>".
- When your code worked and the task may come again, call register_skill (a function named like the skill, the
  values that change as parameters) and tell the user: I created a reusable skill "<name>"."""

SEARCH_DESCRIPTION = "Find learned skills (code that worked before) and lessons from past failures for a task."
USE_DESCRIPTION = "Run a learned skill with parameters matching its schema; returns the output."
REGISTER_DESCRIPTION = (
    "Save code that worked as a skill: Python with a top-level function named like the skill, typed parameters "
    "(defaults for optional ones), returning the result. Same name again: a new version."
)


class SkillSearchResult(BaseModel):
    """What ``search_skills`` returns to the model."""

    skills: list[dict[str, Any]] = Field(default_factory=list)
    lessons: list[Lesson] = Field(default_factory=list)

    def render(self) -> str:
        if not self.skills and not self.lessons:
            return "No learned skill matches this task; write the code yourself."
        parts: list[str] = []
        if self.skills:
            parts.append("Learned skills (best first):")
            for s in self.skills:
                runs = f"{s['runs']} runs" + (f", success rate {s['success_rate']:.0%}" if s["runs"] else "")
                parts.append(f"- {s['name']} (v{s['version']}, {runs}): {s['description']}")
                parts.append(f"  parameters: {json.dumps(s['parameters'], ensure_ascii=False)}")
        else:
            parts.append("No learned skill matches this task; write the code yourself.")
        if self.lessons:
            parts.append("Lessons from past failures on similar tasks:")
            parts.extend(lesson.render() for lesson in self.lessons)
        return "\n".join(parts)


class SkillToolMessage(BaseModel):
    """A short text result (registration, or an error the model should act on)."""

    ok: bool
    message: str
    skill: str | None = None

    def render(self) -> str:
        return self.message


class SkillToolbox:
    """The three operations bound to one :class:`ProceduralMemory` (one user and agent)."""

    def __init__(self, memory: ProceduralMemory, *, lessons: int = 3) -> None:
        self.memory = memory
        self.lessons = lessons

    async def search_skills(self, query: Annotated[str, "the task in a few words"]) -> SkillSearchResult:
        try:
            found = await self.memory.search_skills(query, limit=3)
            lessons = await self.memory.recall_lessons(query, limit=self.lessons) if self.lessons else []
        except ValueError:  # an unusable query (NUL...) finds nothing, like an unrelated one
            return SkillSearchResult()
        return SkillSearchResult(skills=[s.summary() for s in found], lessons=lessons)

    async def use_skill(
        self,
        name: Annotated[str, "skill name"],
        parameters: Annotated[dict[str, Any] | None, "parameter values"] = None,
    ) -> SkillRun | SkillToolMessage:
        try:
            run = await self.memory.use_skill(name, parameters or {})
        except MemoryNotFound:
            return SkillToolMessage(ok=False, message=f"No skill named {name!r}; call search_skills first.")
        except (SkillError, ValueError) as exc:
            return SkillToolMessage(ok=False, message=f"Skill {name!r} was not run: {exc}", skill=name)
        return run

    async def register_skill(
        self,
        name: Annotated[str, "snake_case name"],
        description: Annotated[str, "what it does, when to use it"],
        code: Annotated[str, "the Python code"],
    ) -> SkillToolMessage:
        try:
            # The parameter schema comes from the function's signature; the task wording is a first example.
            result: RegisterResult = await self.memory.register_skill(name, description, code)
        except (SkillError, ValueError) as exc:
            return SkillToolMessage(ok=False, message=f"Skill {name!r} was not registered: {exc}", skill=name)
        skill = result.skill
        what = {"created": "created", "new_version": f"updated to version {skill.version}",
                "unchanged": "already registered with this code"}[result.action]  # fmt: skip
        state = {
            "active": "",
            "pending_approval": " It is waiting for approval before it can be used.",
            "rejected": " An operator rejected this skill: it will not be used.",
            "disabled": " An operator disabled this skill: it will not be used.",
        }[skill.status]
        tell = "" if result.action == "unchanged" or skill.status in ("rejected", "disabled") else (
            f' Tell the user: I created a reusable skill "{skill.name}" for similar requests.'
        )  # fmt: skip
        return SkillToolMessage(ok=True, message=f"Skill {skill.name!r} {what}.{state}{tell}", skill=skill.name)


class SkillFunctionTool(FunctionTool):
    """A FunctionTool whose result the model reads as its ``render()`` text."""

    def return_value_as_string(self, value: Any) -> str:
        render: Callable[[], str] | None = getattr(value, "render", None)
        if callable(render):
            return str(render())
        return super().return_value_as_string(value)


def skill_tools(memory: ProceduralMemory | None) -> list[FunctionTool]:
    """The skill tools for ``memory``; ``[]`` when it is None or procedural memory is disabled."""
    if memory is None or not memory.settings.enabled:
        return []
    box = SkillToolbox(memory)
    tools: list[FunctionTool] = [
        SkillFunctionTool(box.search_skills, SEARCH_DESCRIPTION, name="search_skills"),
        SkillFunctionTool(box.use_skill, USE_DESCRIPTION, name="use_skill"),
    ]
    if memory.settings.auto_register_skills:
        tools.append(SkillFunctionTool(box.register_skill, REGISTER_DESCRIPTION, name="register_skill"))
    return tools


def skills_system_message(settings: ProceduralMemorySettings | None) -> str:
    """The system-prompt addition for skills; ``""`` when procedural memory is disabled."""
    if settings is None or not settings.enabled:
        return ""
    prefer = "\n- Prefer a learned skill over new code." if settings.prefer_skills else ""
    text = SKILLS_PROMPT.format(prefer=prefer)
    if not settings.auto_register_skills:
        text = text.split("\n- When your code worked")[0]
    return text
