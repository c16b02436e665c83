"""Declarative team specs for :class:`~agent_memory.agents.AgentBuilder`.

A spec says which agents make the team and how they behave; it holds no secrets and no live objects, so it
can live in a JSON/YAML file or in the ``agents`` table (``spec`` JSONB, one row per named spec). A default
spec ships (:data:`DEFAULT_TEAM_SPEC`): a CodeAgent and an executor in a selector team with a deterministic
speaker rule, ``TERMINATE`` to finish, at most 20 turns.

Example:
    >>> from agent_memory.agents import TeamSpec
    >>> spec = TeamSpec.model_validate({"name": "fast", "max_turns": 6, "executor": {"timeout_seconds": 30}})
    >>> (spec.code_agent.name, spec.executor.timeout_seconds, spec.context.offload_threshold_tokens)
    ('coder', 30, 500)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..store import MemoryStore, TeamSpecStore
from ._sandbox import SandboxPolicy


class ContextSpec(BaseModel):
    """How the CodeAgent's MemoryContext behaves."""

    model_config = ConfigDict(extra="forbid")

    offload_threshold_tokens: int = Field(default=500, ge=1)
    token_budget: int | None = Field(
        default=16_000, ge=1000, description="tokens of a whole request: system prompt + tool schemas + context"
    )
    first_use_max_tokens: int = Field(default=2000, ge=0)
    keep_recent_full: int = Field(default=2, ge=0)


class CodeAgentSpec(BaseModel):
    """The agent that writes code and reads memory."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="coder", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    system_message: str | None = Field(default=None, description="replaces the built-in prompt")
    extra_instructions: str | None = Field(default=None, description="appended to the prompt")
    max_tool_iterations: int = Field(default=8, ge=1, le=50)
    model_client_stream: bool = False
    memory_tools: bool = True


class ExecutorSpec(BaseModel):
    """The agent that runs code blocks."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="executor", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    kind: Literal["local", "docker"] = Field(default="local", description="AGENT_MEMORY_EXECUTOR overrides it")
    timeout_seconds: int = Field(default=60, ge=1, le=24 * 3600)
    max_output_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)
    excerpt_tokens: int = Field(default=200, ge=20, le=2000)
    docker_image: str = "python:3-slim"
    isolation: Literal["bubblewrap", "none"] = Field(
        default="bubblewrap",
        description="`none` runs code unisolated, as this process: single trusted user only "
        "(AGENT_MEMORY_EXECUTOR_ISOLATION overrides it)",
    )
    network: Literal["none", "host"] = Field(default="none", description="`host` lets code use the network")
    cpu_seconds: int = Field(default=300, ge=1, description="CPU seconds per process")
    memory_mb: int = Field(default=2048, ge=16, description="memory per process")
    max_processes: int = Field(default=256, ge=4, description="processes and threads of the user's code")
    max_file_mb: int = Field(default=1024, ge=1, description="largest file code may write")
    tmp_mb: int = Field(default=256, ge=1, description="size of the private /tmp")
    run_memory_mb: int = Field(default=2048, ge=16, description="memory of the whole run (as root: a cgroup)")
    run_limits: Literal["cgroup", "process"] = Field(
        default="cgroup", description="`process`: as root, per-process limits only (no cgroup needed)"
    )
    work_quota_mb: int = Field(default=4096, ge=1, description="disk the user's files may use, all threads together")
    work_max_files: int = Field(default=100_000, ge=10, description="files and directories the user may keep")
    disk_reserve_mb: int = Field(default=1024, ge=0, description="free disk kept for the database and other users")
    env: list[str] = Field(default_factory=list, description="server environment variables code may see, by name")

    def sandbox_policy(self) -> SandboxPolicy:
        """The sandbox these settings describe (``AGENT_MEMORY_EXECUTOR_ISOLATION`` overrides ``isolation``)."""
        raw = os.environ.get("AGENT_MEMORY_EXECUTOR_ISOLATION", self.isolation)
        if raw not in ("bubblewrap", "none"):
            raise ValueError(f"AGENT_MEMORY_EXECUTOR_ISOLATION={raw!r}: use bubblewrap or none")
        isolation: Literal["bubblewrap", "none"] = "none" if raw == "none" else "bubblewrap"
        limits = {"cpu_seconds", "memory_mb", "max_processes", "max_file_mb", "run_memory_mb", "run_limits"}
        limits |= {"work_quota_mb", "work_max_files", "disk_reserve_mb"}
        fields = self.model_dump(include={"network", *limits})
        return SandboxPolicy(isolation=isolation, tmp_mb=self.tmp_mb, env=list(self.env), **fields)


class TeamSpec(BaseModel):
    """A whole team: agents, speaker rule, termination, limits."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="code-team", min_length=1, max_length=255)
    description: str = "A code agent and an executor working on a two-layer memory."
    team: Literal["selector", "round_robin"] = Field(
        default="selector",
        description="selector: a deterministic rule picks the next speaker (no extra LLM call); "
        "round_robin: coder and executor alternate",
    )
    max_turns: int = Field(default=20, ge=1, le=500)
    termination_text: str = "TERMINATE"
    code_agent: CodeAgentSpec = Field(default_factory=CodeAgentSpec)
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)
    context: ContextSpec = Field(default_factory=ContextSpec)

    @classmethod
    def from_file(cls, path: str | Path) -> TeamSpec:
        """Load a JSON (or YAML, by suffix) spec file."""
        path = Path(path).expanduser()
        text = path.read_text(encoding="utf-8")
        data: Any
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
        return cls.model_validate(data)

    def to_file(self, path: str | Path) -> None:
        Path(path).expanduser().write_text(self.model_dump_json(indent=2), encoding="utf-8")

    @classmethod
    async def from_db(cls, store: MemoryStore, name: str) -> TeamSpec:
        """The spec stored under ``name`` in the ``agents`` table. ``LookupError`` when there is none."""
        data = await TeamSpecStore(store.db).get(name)
        if data is None:
            raise LookupError(f"no agent spec named {name!r} in the agents table")
        return cls.model_validate({**data, "name": name})

    async def save_to_db(self, store: MemoryStore) -> None:
        """Insert or replace this spec in the ``agents`` table (by name)."""
        await TeamSpecStore(store.db).save(self.name, self.description, self.model_dump(mode="json"))


DEFAULT_TEAM_SPEC = TeamSpec()
