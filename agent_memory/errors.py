"""Exceptions raised by agent-memory."""

from __future__ import annotations


class AgentMemoryError(Exception):
    """Base class for agent-memory errors."""


class MemoryNotFound(AgentMemoryError, KeyError):
    """No memory with this key exists for this user.

    Raised identically whether the key does not exist at all or belongs to another user, so callers
    cannot probe other users' keys.
    """

    def __init__(self, key: str) -> None:
        shown = key if len(key) <= 80 else key[:77] + "..."
        super().__init__(f"memory {shown!r} not found")
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0])


class DatabaseUnavailable(AgentMemoryError):
    """The PostgreSQL server cannot be reached or initialised. The message says what to do."""


class PatternTooCostly(AgentMemoryError, ValueError):
    """A grep pattern took longer than its time limit (``AGENT_MEMORY_GREP_TIMEOUT_SECONDS``) and was stopped.

    A ``ValueError``, like any other bad pattern: surfaces answer it as bad input (CLI exit 2, MCP tool error).
    """
