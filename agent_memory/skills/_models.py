"""The skills wing's models: skills, versions, runs, lessons, drafts, settings and errors.

A **skill** is named, parameterised code (Python or bash) with a JSON-Schema for its parameters, owned by one
``(user, agent)`` pair. Ranking prefers reliable skills: ``score = relevance * (0.5 + 0.5 * reliability)`` where
reliability is the Laplace-smoothed success rate ``(successes + 1) / (runs + 2)``; the threshold applies to
relevance, so a broken skill is still findable by name but drops below a working one for the same task.

Example:
    >>> SkillRun(name="add", version=1, success=True, exit_code=0, output="5\\n").render()
    'Skill add v1 succeeded.\\nOutput:\\n5\\n'
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..errors import AgentMemoryError, MemoryNotFound

SkillStatus = Literal["active", "pending_approval", "rejected", "disabled"]
STATUSES: tuple[SkillStatus, ...] = ("active", "pending_approval", "rejected", "disabled")
MAX_CODE_CHARS = 200_000
MAX_DESCRIPTION_CHARS = 2000
LESSON_TAG = "failure-derived"
SUCCESS_TAG = "success-derived"


class SkillNotFound(MemoryNotFound):
    """No skill of this name for this user and agent (also raised for another user's or agent's skill)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.args = (f"skill {name!r} not found",)


class SkillError(AgentMemoryError, ValueError):
    """A skill operation was refused (invalid parameters, not active, limit reached...). The message says why."""


class SkillNotActive(SkillError):
    """The skill exists but may not run: pending approval, rejected or disabled."""


class SkillLimitReached(SkillError):
    """``max_skills_per_user`` skills already exist for this user and agent."""


class ProceduralMemorySettings(BaseSettings):
    """Procedural-memory switches (approval, limits, search threshold, runs); env ``AGENT_MEMORY_SKILLS_<FIELD>``.

    ``enabled=False`` (the default) means no skill tools and no prompt addition: agents behave exactly as before.

    Example:
        >>> ProceduralMemorySettings(enabled=True, require_skill_approval=True).require_skill_approval
        True
    """

    model_config = SettingsConfigDict(env_prefix="AGENT_MEMORY_SKILLS_", extra="ignore")

    enabled: bool = Field(default=False, description="Skill tools and prompt for agents (off: unchanged agents).")
    auto_register_skills: bool = Field(default=True, description="Agents may register skills (register_skill tool).")
    require_skill_approval: bool = Field(default=False, description="New skills wait for approval before use.")
    max_skills_per_user: int = Field(default=0, ge=0, description="Skills per user and agent; 0 = unlimited.")
    skill_search_threshold: float = Field(
        default=0.3, ge=0.0, le=1.0, description="Minimum relevance (0..1) of a search hit."
    )
    prefer_skills: bool = Field(default=True, description="The prompt tells the agent to search skills first.")
    execution_timeout: int = Field(default=60, ge=1, description="Seconds a skill run may take (tree killed after).")
    max_output_chars: int = Field(default=8000, ge=200, description="Output of a run shown to the model.")
    learn_from_runs: bool = Field(
        default=False,
        description="After each team run: lessons from failures that were then fixed, and the code that worked "
        "proposed as a skill (pending approval) when the agent registered none.",
    )


class Skill(BaseModel):
    """One skill (current version). ``relevance``/``score`` are set by search."""

    model_config = ConfigDict(frozen=True)

    name: str
    agent_id: str
    description: str
    code: str
    language: str = "python"
    parameters: dict[str, Any] = Field(default_factory=dict)
    example_prompts: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    status: SkillStatus = "active"
    source: str = "agent"
    version: int = 1
    execution_count: int = 0
    success_count: int = 0
    last_error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None = None
    relevance: float | None = None
    score: float | None = None

    @property
    def success_rate(self) -> float | None:
        """Successful runs / runs of this version; None before the first run."""
        return self.success_count / self.execution_count if self.execution_count else None

    @property
    def reliability(self) -> float:
        """Laplace-smoothed success rate: 0.5 untried, towards 1 (or 0) as runs succeed (or fail)."""
        return (self.success_count + 1) / (self.execution_count + 2)

    @property
    def entrypoint(self) -> str | None:
        value = self.metadata.get("entrypoint")
        return value if isinstance(value, str) else None

    def summary(self) -> dict[str, Any]:
        """What a model needs to decide and call: name, description, parameters, track record."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "version": self.version,
            "runs": self.execution_count,
            "success_rate": None if self.success_rate is None else round(self.success_rate, 3),
        }
        if self.relevance is not None:
            out["relevance"] = round(self.relevance, 3)
        return out


class SkillVersion(BaseModel):
    """One version in a skill's history."""

    version: int
    description: str
    code: str
    language: str
    parameters: dict[str, Any]
    example_prompts: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    execution_count: int = 0
    success_count: int = 0
    source: str = "agent"
    created_at: datetime


class RegisterResult(BaseModel):
    """What ``register_skill`` did: ``created`` (new skill), ``new_version`` (changed), or ``unchanged``."""

    skill: Skill
    action: Literal["created", "new_version", "unchanged"]


class SkillRun(BaseModel):
    """Outcome of one ``use_skill`` call."""

    name: str
    version: int
    success: bool
    exit_code: int
    output: str = Field(description="stdout+stderr (capped at max_output_chars; full text in memory_key if stored)")
    truncated: bool = False
    timed_out: bool = False
    duration_s: float | None = None
    memory_key: str | None = None

    def render(self) -> str:
        status = "succeeded" if self.success else ("timed out" if self.timed_out else f"failed (exit {self.exit_code})")
        head = f"Skill {self.name} v{self.version} {status}."
        more = f" Full output stored as {self.memory_key}." if self.memory_key else ""
        return f"{head}{more}\nOutput:\n{self.output}" if self.output.strip() else f"{head} No output."


class SkillStats(BaseModel):
    """Counts of one user's skills (optionally one agent's)."""

    total: int
    by_status: dict[str, int]
    executions: int
    successes: int
    success_rate: float | None
    most_used: list[dict[str, Any]]


class Lesson(BaseModel):
    """A failure-derived lesson: when a task like ``when`` fails with ``error``, do ``do``."""

    key: str
    when: str
    error: str
    do: str
    score: float | None = None
    created_at: datetime

    def render(self) -> str:
        return f"- When {self.when}: {self.do}" + (f" (it failed with: {self.error})" if self.error else "")


class SkillDraft(BaseModel):
    """A skill not yet registered (from capture or a SKILL.md folder)."""

    name: str
    description: str
    code: str
    language: str = "python"
    parameters: dict[str, Any] | None = None
    example_prompts: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    entrypoint: str | None = None
    source: str = "capture"
    generalised_by_llm: bool = False


def skill_from_row(row: dict[str, Any], **extra: Any) -> Skill:
    """A :class:`Skill` from a row of the store's skill statements (``extra``: relevance, score)."""
    return Skill(
        name=row["name"], agent_id=row["agent_id"], description=row["description"], code=row["code"],
        language=row["language"], parameters=row["parameters"] or {}, example_prompts=list(row["example_prompts"]),
        tags=list(row["tags"]), status=row["status"], source=row["source"], version=row["version"],
        execution_count=row["execution_count"], success_count=row["success_count"], last_error=row["last_error"],
        metadata=row["metadata"] or {}, created_at=row["created_at"], updated_at=row["updated_at"],
        last_used_at=row["last_used_at"], **extra,
    )  # fmt: skip


def version_from_row(row: dict[str, Any]) -> SkillVersion:
    return SkillVersion(
        version=row["version"], description=row["description"], code=row["code"], language=row["language"],
        parameters=row["parameters"], example_prompts=list(row["example_prompts"]), tags=list(row["tags"]),
        execution_count=row["execution_count"], success_count=row["success_count"], source=row["source"],
        created_at=row["created_at"],
    )  # fmt: skip
