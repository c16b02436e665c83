"""Skill tools of the MCP server: list, show, approve, reject, disable, export (operators' view of procedural memory).

:func:`register_skill_tools` (called by ``create_server``; it does nothing unless ``AGENT_MEMORY_SKILLS_ENABLED``
is true) adds them to a :class:`~agent_memory.mcp.MemoryMCP`; like the memory tools they
act for the server's user (stdio ``--user``, or the bearer token's user over HTTP) and take no user argument.
``agent`` picks the skill's agent when a name exists for several agents of the user. ``export_skill`` returns the
Agent Skills folder as files (``SKILL.md``, ``scripts/...``) instead of writing on the server's disk.

Example:
    >>> from agent_memory.mcp import create_server
    >>> from agent_memory.mcp import register_skill_tools
    >>> server = create_server(store, user_id="alice")  # doctest: +SKIP
    >>> register_skill_tools(server, force=True)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.fastmcp import Context
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from ..errors import MemoryNotFound
from ..skills import (
    STATUSES,
    ProceduralMemorySettings,
    Skill,
    SkillRegistry,
    SkillStatus,
    SkillVersion,
    write_skill_folder,
)

if TYPE_CHECKING:
    from ._server import MemoryMCP

# Module level: FastMCP evaluates the tools' annotations against this module's globals.
AGENT_FIELD = Field(description="the skill's agent (needed when several agents have a skill of this name)")
SkillName = Annotated[str, Field(description="skill name")]
SkillAgent = Annotated[str | None, AGENT_FIELD]
SKILL_TOOL_NAMES = ("list_skills", "show_skill", "approve_skill", "reject_skill", "disable_skill", "export_skill")


class SkillInfo(BaseModel):
    """A skill without its code."""

    name: str
    agent_id: str
    description: str
    status: str
    version: int
    language: str
    execution_count: int
    success_count: int
    success_rate: float | None
    last_used_at: str | None
    parameters: dict[str, Any]
    tags: list[str]

    @classmethod
    def of(cls, s: Skill) -> SkillInfo:
        return cls(
            name=s.name, agent_id=s.agent_id, description=s.description, status=s.status, version=s.version,
            language=s.language, execution_count=s.execution_count, success_count=s.success_count,
            success_rate=s.success_rate, last_used_at=s.last_used_at.isoformat() if s.last_used_at else None,
            parameters=s.parameters, tags=s.tags,
        )  # fmt: skip

    def line(self) -> str:
        rate = f"{self.success_rate:.0%}" if self.success_rate is not None else "-"
        return (
            f"{self.name} (agent {self.agent_id}, v{self.version}, {self.status}, {self.execution_count} runs, "
            f"{rate} ok): {self.description}"
        )


class SkillList(BaseModel):
    skills: list[SkillInfo]

    def render(self) -> str:
        return "\n".join(s.line() for s in self.skills) or "no skills"


class SkillDetail(BaseModel):
    skill: SkillInfo
    code: str
    entrypoint: str | None
    example_prompts: list[str]
    last_error: str | None
    history: list[dict[str, Any]]

    def render(self) -> str:
        versions = ", ".join(f"v{v['version']} ({v['success_count']}/{v['execution_count']} ok)" for v in self.history)
        return (
            f"{self.skill.line()}\nparameters: {self.skill.parameters}\nlast error: {self.last_error or '-'}\n"
            f"versions: {versions}\n\n{self.code}"
        )


class SkillStatusResult(BaseModel):
    skill: SkillInfo

    def render(self) -> str:
        return f"{self.skill.name} (agent {self.skill.agent_id}) is now {self.skill.status}"


class SkillExport(BaseModel):
    folder: str = Field(description="Agent Skills folder name")
    files: dict[str, str] = Field(description="relative path -> file content (SKILL.md, scripts/...)")

    def render(self) -> str:
        return "\n\n".join(f"=== {self.folder}/{path} ===\n{content}" for path, content in sorted(self.files.items()))


def _result(model: Any) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=model.render())], structuredContent=model.model_dump(mode="json")
    )


def _export_files(skill: Skill) -> SkillExport:
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_skill_folder(Path(tmp), skill)
        files = {str(p.relative_to(folder)): p.read_text(encoding="utf-8") for p in folder.rglob("*") if p.is_file()}
        return SkillExport(folder=folder.name, files=files)


def register_skill_tools(
    mcp: MemoryMCP, *, settings: ProceduralMemorySettings | None = None, force: bool = False
) -> None:
    """Add the skill tools to ``mcp`` (each call acts for the request's user).

    Only when procedural memory is enabled (``AGENT_MEMORY_SKILLS_ENABLED=true``) or ``force``: a server without
    skills keeps exactly its memory tools.
    """
    if not force and not (settings or ProceduralMemorySettings()).enabled:
        return
    registry = SkillRegistry(mcp.store)
    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
    change = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)

    async def locate(ctx: Context[Any, Any, Any], name: str, agent: str | None) -> tuple[str, str]:
        user = mcp.current_user(ctx)
        try:
            return user, await registry.resolve_agent(user, name, agent)
        except (MemoryNotFound, ValueError) as exc:
            raise ToolError(str(exc)) from None

    @mcp.tool(
        title="List skills",
        annotations=read_only,
        description="The user's learned skills (procedural memory) with status, version and run counts.",
    )
    async def list_skills(
        ctx: Context[Any, Any, Any],
        agent: Annotated[str | None, Field(description="only this agent's skills")] = None,
        status: Annotated[SkillStatus | None, Field(description=f"only this status: {', '.join(STATUSES)}")] = None,
    ) -> Annotated[CallToolResult, SkillList]:
        skills = await registry.list(mcp.current_user(ctx), agent, status=status)
        return _result(SkillList(skills=[SkillInfo.of(s) for s in skills]))

    @mcp.tool(title="Show a skill", annotations=read_only,
              description="One skill: description, parameters, track record, version history and code.")  # fmt: skip
    async def show_skill(
        name: SkillName, ctx: Context[Any, Any, Any], agent: SkillAgent = None
    ) -> Annotated[CallToolResult, SkillDetail]:
        user, owner = await locate(ctx, name, agent)
        try:
            skill = await registry.get(user, owner, name)
            history: list[SkillVersion] = await registry.versions(user, owner, name)
        except MemoryNotFound as exc:
            raise ToolError(str(exc)) from None
        return _result(
            SkillDetail(
                skill=SkillInfo.of(skill), code=skill.code, entrypoint=skill.entrypoint,
                example_prompts=skill.example_prompts, last_error=skill.last_error,
                history=[v.model_dump(mode="json", exclude={"code"}) for v in history],
            )
        )  # fmt: skip

    def status_tool(tool_name: str, status: SkillStatus, text: str) -> None:
        async def set_status(
            name: SkillName, ctx: Context[Any, Any, Any], agent: SkillAgent = None
        ) -> Annotated[CallToolResult, SkillStatusResult]:
            user, owner = await locate(ctx, name, agent)
            return _result(SkillStatusResult(skill=SkillInfo.of(await registry.set_status(user, owner, name, status))))

        mcp.tool(name=tool_name, title=text.split(":")[0], annotations=change, description=text)(set_status)

    status_tool("approve_skill", "active", "Approve a skill: it becomes active (found and usable by its agent).")
    status_tool("reject_skill", "rejected", "Reject a skill: it is never found or run (kept for audit).")
    status_tool("disable_skill", "disabled", "Disable a skill without deleting it: it is no longer found or run.")

    @mcp.tool(title="Export a skill", annotations=read_only,
              description="A skill as an Agent Skills folder: SKILL.md (YAML front matter + instructions) and its "
              "script, returned as files.")  # fmt: skip
    async def export_skill(
        name: SkillName, ctx: Context[Any, Any, Any], agent: SkillAgent = None
    ) -> Annotated[CallToolResult, SkillExport]:
        user, owner = await locate(ctx, name, agent)
        skill = await registry.get(user, owner, name)
        return _result(await asyncio.to_thread(_export_files, skill))
