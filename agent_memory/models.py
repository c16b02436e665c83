"""Records returned by the store."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class MemoryItem(BaseModel):
    """What the store knows about one memory, without its content (use ``retrieve`` for that).

    ``score`` is set by ``search`` (higher is better) and ``None`` elsewhere. Lifecycle: ``version`` counts
    updates (earlier versions stay retrievable); ``status`` is ``held``, ``contested`` (an equal-strength
    contradiction on the same ``subject``) or ``retracted`` (with ``status_reason``); ``valid_until`` is set when
    a newer fact on the same subject replaced this one; ``expires_at`` is when it stops being returned at all.
    """

    model_config = ConfigDict(frozen=True)

    memory_key: str
    description: str
    memory_type: str
    score: float | None = None
    token_count: int
    char_count: int = 0
    created_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent_id: str | None = None
    thread_id: str | None = None
    access_count: int = 0
    last_accessed_at: datetime | None = None
    content_sha256: str = ""
    version: int = 1
    status: str = "held"
    status_reason: str | None = None
    subject: str | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    expires_at: datetime | None = None
    updated_at: datetime | None = None
    why: dict[str, Any] | None = None  # search only: each ranker's {"rank", "evidence"} that found it
    matched_lines: str | None = None  # search only: "A-B", the lines of a long content where the words matched

    @property
    def current(self) -> bool:
        """Whether it holds now: not retracted and not replaced by a newer fact on its subject."""
        return self.status != "retracted" and self.valid_until is None


class MemoryStats(BaseModel):
    """Per-type counts and token totals of one user's memories."""

    total_memories: int
    total_tokens: int
    by_type: dict[str, dict[str, int]]


class MemoryVersion(BaseModel):
    """One version of a memory in its history (the current one has ``current=True``)."""

    model_config = ConfigDict(frozen=True)

    version: int
    current: bool
    written_at: datetime
    actor: str | None = None
    surface: str
    description: str
    memory_type: str
    token_count: int
    char_count: int
    content_sha256: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class AuditEntry(BaseModel):
    """One change to a user's memory: who (``actor``), through what (``surface``), when, and why."""

    model_config = ConfigDict(frozen=True)

    at: datetime
    action: str
    memory_key: str | None = None
    actor: str | None = None
    surface: str
    reason: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
