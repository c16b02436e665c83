"""The self-editing memory operations: correct a memory (a new version), read its history, retract it.

Mixed into :class:`~agent_memory.tools.MemoryToolbox`, so agents (AutoGen tools) and MCP clients share them.
Every change is audited with the toolbox's agent (or user) as actor and its surface (``agent`` or ``mcp``).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ..errors import MemoryNotFound
from ..placeholders import format_memory_ref
from ._errors import MemoryToolError, _check_key, _not_found

if TYPE_CHECKING:
    from ..store import MemoryStore


class UpdateResult(BaseModel):
    """The memory after an update."""

    key: str
    version: int = Field(description="the new version; earlier ones stay retrievable")
    description: str
    placeholder: str
    token_count: int

    def render(self) -> str:
        return f"Updated {self.key} to version {self.version}: {self.placeholder}"


class VersionSummary(BaseModel):
    version: int
    current: bool
    written_at: datetime
    actor: str | None = None
    surface: str
    description: str
    token_count: int


class HistoryResult(BaseModel):
    """Every version of one memory, oldest first, and its status."""

    key: str
    status: str = Field(description="held, contested or retracted")
    status_reason: str | None = None
    valid_until: datetime | None = Field(default=None, description="set when a newer fact replaced this one")
    versions: list[VersionSummary]

    def render(self) -> str:
        lines = [f"{self.key}: {self.status}" + (f" ({self.status_reason})" if self.status_reason else "")]
        if self.valid_until is not None:
            lines.append(f"replaced by a newer fact on {self.valid_until:%Y-%m-%d %H:%M}")
        for v in self.versions:
            who = f" by {v.actor}" if v.actor else ""
            mark = " (current)" if v.current else ""
            lines.append(f"v{v.version}{mark} {v.written_at:%Y-%m-%d %H:%M} via {v.surface}{who}: {v.description}")
        return "\n".join(lines)


class RetractResult(BaseModel):
    key: str
    status: str
    reason: str

    def render(self) -> str:
        return f"Retracted {self.key} ({self.reason}): it no longer shows in search or the user's standing facts."


class EditingTools:
    """``update_memory``, ``memory_history`` and ``retract_memory`` of :class:`MemoryToolbox`."""

    store: MemoryStore
    user_id: str
    agent_id: str | None
    source: str

    @property
    def _surface(self) -> str:
        return "mcp" if self.source == "mcp" else "agent"

    @property
    def _actor(self) -> str:
        return self.agent_id or self.user_id

    async def update_memory(self, key: str, content: str | None = None, description: str | None = None) -> UpdateResult:
        """Correct memory ``key``: new content and/or description; the old version stays in its history."""
        key = _check_key(key)
        try:
            item = await self.store.update(
                key, user_id=self.user_id, content=content, description=description, actor=self._actor,
                surface=self._surface,
            )  # fmt: skip
        except MemoryNotFound:
            raise _not_found(key) from None
        except ValueError as exc:
            raise MemoryToolError(str(exc)) from None
        return UpdateResult(
            key=key, version=item.version, description=item.description, token_count=item.token_count,
            placeholder=format_memory_ref(key, item.description, item.token_count),
        )  # fmt: skip

    async def memory_history(self, key: str) -> HistoryResult:
        """The versions of memory ``key`` (who, when, through what) and its status."""
        key = _check_key(key)
        try:
            item = await self.store.get(key, user_id=self.user_id)
            versions = await self.store.history(key, user_id=self.user_id)
        except MemoryNotFound:
            raise _not_found(key) from None
        return HistoryResult(
            key=key, status=item.status, status_reason=item.status_reason, valid_until=item.valid_until,
            versions=[
                VersionSummary(
                    version=v.version, current=v.current, written_at=v.written_at, actor=v.actor, surface=v.surface,
                    description=v.description, token_count=v.token_count,
                )
                for v in versions
            ],
        )  # fmt: skip

    async def retract_memory(self, key: str, reason: str) -> RetractResult:
        """Retract memory ``key`` (wrong or no longer true): hidden from search, kept retrievable by key."""
        key = _check_key(key)
        try:
            item = await self.store.retract(
                key, user_id=self.user_id, reason=reason, actor=self._actor, surface=self._surface
            )
        except MemoryNotFound:
            raise _not_found(key) from None
        except ValueError as exc:
            raise MemoryToolError(str(exc)) from None
        return RetractResult(key=key, status=item.status, reason=item.status_reason or reason)
