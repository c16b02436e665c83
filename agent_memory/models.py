"""Records returned by the store."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class MemoryItem(BaseModel):
    """What the store knows about one memory, without its content (use ``retrieve`` for that).

    ``score`` is set by ``search`` (higher is better) and ``None`` elsewhere.
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


class MemoryStats(BaseModel):
    """Per-type counts and token totals of one user's memories."""

    total_memories: int
    total_tokens: int
    by_type: dict[str, dict[str, int]]
