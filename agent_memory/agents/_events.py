"""Memory events in the team's event stream, for UIs and the terminal chat.

* :class:`MemoryStoredEvent` — the executor stored a big output instead of posting it.
* :class:`MemoryContextEvent` — the CodeAgent's MemoryContext offloaded a message (``stored``), expanded an
  offloaded item for this turn because the user referred to it (``expanded``), or injected the user's
  memories for an ambiguous request (``recalled``). :class:`~agent_memory.agents.AgentSession`
  emits these between the team's own events.

Both are AgentChat ``BaseAgentEvent`` subclasses (teams built by AgentBuilder register them).

Example:
    >>> e = MemoryContextEvent(source="coder", action="expanded", memory_keys=["cmd_1a2b3c4d5e6f"])
    >>> e.to_text()
    'memory expanded: cmd_1a2b3c4d5e6f'
"""

from __future__ import annotations

from typing import Any, Literal

from autogen_agentchat.messages import BaseAgentEvent
from pydantic import Field


class MemoryStoredEvent(BaseAgentEvent):
    """An agent stored content in memory instead of posting it (UI/CLI show a marker)."""

    memory_key: str
    description: str
    memory_type: str
    token_count: int
    placeholder: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    type: Literal["MemoryStoredEvent"] = "MemoryStoredEvent"

    def to_text(self) -> str:
        return f"stored {self.token_count} tokens as {self.placeholder}"


class MemoryContextEvent(BaseAgentEvent):
    """What a MemoryContext did with the conversation: ``stored``, ``expanded`` or ``recalled``."""

    action: Literal["stored", "expanded", "recalled"]
    memory_keys: list[str] = Field(default_factory=list)
    detail: str = ""
    type: Literal["MemoryContextEvent"] = "MemoryContextEvent"

    def to_text(self) -> str:
        keys = ", ".join(self.memory_keys) or "-"
        return f"memory {self.action}: {keys}" + (f" ({self.detail})" if self.detail else "")


class CodeProgressEvent(BaseAgentEvent):
    """Code is still running: time so far, bytes of output so far and its last lines (UIs show a live step)."""

    elapsed_s: float
    output_bytes: int
    tail: str = Field(default="", description="the last lines of the output so far (at most ~4,000 characters)")
    languages: list[str] = Field(default_factory=list)
    type: Literal["CodeProgressEvent"] = "CodeProgressEvent"

    def to_text(self) -> str:
        last = self.tail.rstrip("\n").rsplit("\n", 1)[-1] if self.tail.strip() else ""
        return f"running {self.elapsed_s:.0f}s, {self.output_bytes} bytes of output" + (f": {last}" if last else "")


# agent-memory's own events, which teams and message factories must know besides AgentChat's
AGENT_MEMORY_EVENTS: tuple[type[BaseAgentEvent], ...] = (MemoryStoredEvent, MemoryContextEvent, CodeProgressEvent)
