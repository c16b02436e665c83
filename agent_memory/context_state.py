"""What a :class:`~agent_memory.context.MemoryContext` remembers, and how it is saved to PostgreSQL.

The state is a list of :class:`ContextEntry`: each is a message as it was added, except that every big
piece of it (a slot: the string content, a text part of a multi-part user message, one function result)
was offloaded to the store and is described by an :class:`OffloadedPart` (key, token count, description,
excerpt). The state is plain JSON, so ``save_state()``/``load_state()`` round-trip through ``json.dumps``,
and a thread's state is kept in table ``agent_memory_contexts`` (sql/postgresdb.sql, section 2) keyed by
(user, thread, agent) so a resumed thread rebuilds exactly the same context.

Example:
    >>> from autogen_core.models import UserMessage
    >>> entry = ContextEntry(message=UserMessage(content="hi", source="user"))
    >>> ContextState(entries=[entry]).model_dump(mode="json")["entries"][0]["message"]["content"]
    'hi'
"""

from __future__ import annotations

from typing import Any, Literal

import asyncpg
from autogen_core.models import LLMMessage, SystemMessage
from pydantic import BaseModel, Field, PrivateAttr

STATE_VERSION = 1


class OffloadedPart(BaseModel):
    """One big piece of a message, stored in ``agent_memories`` (or waiting to be, while the DB is down)."""

    slot: int
    """Where the piece sits: 0 for string content, the list index for multi-part user content and results."""
    key: str | None = None
    """The memory key; ``None`` while the store was unreachable (``pending_content`` holds the text)."""
    tokens: int
    description: str
    excerpt: str
    memory_type: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    first_use: str | None = None
    """What the model sees while the part is among the newest ``keep_recent_full`` (the full content when it
    fits ``first_use_max_tokens``, else a larger excerpt). Dropped once the part is compacted for good."""
    first_use_is_full: bool = False
    pending_content: str | None = None
    """The exact content, kept inline only while it could not be stored (database unreachable)."""
    identifiers: list[str] = Field(default_factory=list)
    """Identifiers of the description and tool arguments (file names, error codes...), matched against new
    user messages; the stored content itself is matched in SQL when a user message arrives."""
    compacted: bool = False
    """True once the part left the first-use window (its compact form is final)."""


class ReferencedItem(BaseModel):
    """A ``[MemoryRef: ...]`` that arrived inside a message (e.g. from an executor that offloads by itself)
    and was verified to be one of this user's memories. Anything else in a placeholder shape is plain text."""

    key: str
    description: str
    tokens: int
    memory_type: str


EntryKind = Literal["message", "expansion", "recall"]


class ContextEntry(BaseModel):
    """One message of the context; ``parts`` say which of its slots were offloaded."""

    message: LLMMessage
    parts: list[OffloadedPart] = Field(default_factory=list)
    kind: EntryKind = "message"
    """``message``: added by the caller. ``expansion``: an offloaded item expanded for one turn because the
    user referred to it (removed at the next user message). ``recall``: user memories found for an
    ambiguous request."""
    refs: list[ReferencedItem] = Field(default_factory=list)
    """This user's memories that the message's own text refers to (verified in SQL when it was added)."""
    archive_key: str | None = None
    """Key of the stored transcript span holding this message's text, once the budget made it drop out."""

    # (first-use rendering, tokens, compact rendering, tokens); not part of the state, rebuilt on demand.
    _rendered: tuple[Any, int, Any, int] | None = PrivateAttr(default=None)

    def invalidate(self) -> None:
        """Forget the cached rendering (after a part changed)."""
        self._rendered = None


class ContextState(BaseModel):
    """Everything needed to rebuild a context exactly (JSON-serialisable with ``model_dump(mode="json")``)."""

    version: int = STATE_VERSION
    entries: list[ContextEntry] = Field(default_factory=list)
    user_layer: SystemMessage | None = None
    user_layer_keys: list[str] = Field(default_factory=list)
    user_layer_loaded: bool = False


# $1 user identifier, $2 thread id, $3 agent key ('' = none), $4 state JSON
_SAVE_SQL = """
WITH found AS (SELECT id FROM "User" WHERE identifier = $1),
created AS (
    INSERT INTO "User" (identifier) SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM found)
    ON CONFLICT (identifier) DO NOTHING RETURNING id
)
INSERT INTO agent_memory_contexts (user_id, thread_id, agent_key, state, updated_at)
SELECT coalesce((SELECT id FROM found), (SELECT id FROM created)), $2, $3, $4, now()
ON CONFLICT (user_id, thread_id, agent_key) DO UPDATE SET state = EXCLUDED.state, updated_at = now()
"""

_LOAD_SQL = """
SELECT c.state FROM agent_memory_contexts c JOIN "User" u ON u.id = c.user_id
WHERE u.identifier = $1 AND c.thread_id = $2 AND c.agent_key = $3
"""

_DELETE_SQL = """
DELETE FROM agent_memory_contexts c USING "User" u
WHERE u.id = c.user_id AND u.identifier = $1 AND c.thread_id = $2 AND c.agent_key = $3
"""


async def save_context_state(
    pool: asyncpg.Pool, user_id: str, thread_id: str, agent_id: str | None, state: dict[str, Any]
) -> None:
    """Upsert the state of (user, thread, agent)."""
    for _attempt in range(3):
        try:
            await pool.execute(_SAVE_SQL, user_id, thread_id, agent_id or "", state)
            return
        except asyncpg.NotNullViolationError:
            continue  # the user row was created concurrently by another session: it exists now
    raise RuntimeError("could not save the context state: user row kept disappearing")


async def load_context_state(
    pool: asyncpg.Pool, user_id: str, thread_id: str, agent_id: str | None
) -> dict[str, Any] | None:
    """The saved state of (user, thread, agent), or ``None``. Filters by user in SQL."""
    value = await pool.fetchval(_LOAD_SQL, user_id, thread_id, agent_id or "")
    return dict(value) if isinstance(value, dict) else None


async def delete_context_state(pool: asyncpg.Pool, user_id: str, thread_id: str, agent_id: str | None) -> None:
    await pool.execute(_DELETE_SQL, user_id, thread_id, agent_id or "")
