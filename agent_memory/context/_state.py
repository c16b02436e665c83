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

import base64
import json
import logging
from typing import Any, Literal

import asyncpg
from autogen_core.models import LLMMessage, SystemMessage
from pydantic import BaseModel, Field

STATE_VERSION = 1
log = logging.getLogger(__name__)


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

    id: int = -1
    """Stable id within the context (assigned when added): the row key of the entry in PostgreSQL."""
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


class ContextState(BaseModel):
    """Everything needed to rebuild a context exactly (JSON-serialisable with ``model_dump(mode="json")``)."""

    version: int = STATE_VERSION
    entries: list[ContextEntry] = Field(default_factory=list)
    next_entry_id: int = 0
    user_layer: SystemMessage | None = None
    user_layer_keys: list[str] = Field(default_factory=list)
    user_layer_loaded: bool = False

    def assign_ids(self) -> None:
        """Give entries without an id (older states, AutoGen states) consecutive ids."""
        for entry in self.entries:
            if entry.id < 0:
                entry.id = self.next_entry_id
                self.next_entry_id += 1
            else:
                self.next_entry_id = max(self.next_entry_id, entry.id + 1)

    def header(self) -> dict[str, Any]:
        """The state without its entries (those are saved one row each)."""
        return self.model_dump(mode="json", exclude={"entries"})


class StateChanges:
    """What changed since the last save, so a save writes O(changes), not the whole conversation."""

    def __init__(self) -> None:
        self.replace_all = True  # the first save of a context object writes everything
        self.upserts: set[int] = set()
        self.deletes: set[int] = set()
        self.revision: int | None = None
        """Revision of the saved state this object last loaded or wrote; ``None``: unknown."""

    def touch(self, entry: ContextEntry) -> None:
        self.upserts.add(entry.id)
        self.deletes.discard(entry.id)

    def remove(self, entry: ContextEntry) -> None:
        self.deletes.add(entry.id)
        self.upserts.discard(entry.id)

    def everything(self) -> None:
        self.replace_all = True
        self.upserts.clear()
        self.deletes.clear()

    def clear(self) -> None:
        """Everything is saved (the revision stays: it is what the database now holds)."""
        self.replace_all = False
        self.upserts.clear()
        self.deletes.clear()


_USER_ID_SQL = """
WITH found AS (SELECT id FROM "User" WHERE identifier = $1),
created AS (
    INSERT INTO "User" (identifier) SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM found)
    ON CONFLICT (identifier) DO NOTHING RETURNING id
)
SELECT coalesce((SELECT id FROM found), (SELECT id FROM created))
"""

_HEADER_SQL = """
INSERT INTO agent_memory_contexts (user_id, thread_id, agent_key, state, revision, updated_at)
VALUES ($1, $2, $3, $4, 1, now())
ON CONFLICT (user_id, thread_id, agent_key)
DO UPDATE SET state = EXCLUDED.state, revision = agent_memory_contexts.revision + 1, updated_at = now()
RETURNING revision
"""

_LOCK_HEADER_SQL = """
SELECT revision FROM agent_memory_contexts WHERE user_id = $1 AND thread_id = $2 AND agent_key = $3 FOR UPDATE
"""

_UPSERT_ENTRY_SQL = """
INSERT INTO agent_memory_context_entries (user_id, thread_id, agent_key, entry_id, entry)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (user_id, thread_id, agent_key, entry_id) DO UPDATE SET entry = EXCLUDED.entry
"""

_LOAD_HEADER_SQL = """
SELECT c.user_id, c.state, c.revision FROM agent_memory_contexts c JOIN "User" u ON u.id = c.user_id
WHERE u.identifier = $1 AND c.thread_id = $2 AND c.agent_key = $3
"""

_LOAD_ENTRIES_SQL = """
SELECT entry FROM agent_memory_context_entries
WHERE user_id = $1 AND thread_id = $2 AND agent_key = $3 ORDER BY entry_id
"""

_DELETE_SQL = """
DELETE FROM agent_memory_contexts c USING "User" u
WHERE u.id = c.user_id AND u.identifier = $1 AND c.thread_id = $2 AND c.agent_key = $3
"""


_PACKED = "utf8_surrogatepass_b64"


def encode_entry(entry: ContextEntry) -> dict[str, Any]:
    """The entry as JSONB. A message with NUL characters or lone surrogates (valid in a Python ``str``, refused
    by JSONB) is packed as base64 of its JSON text, so the context still saves and resumes it exactly."""
    data = entry.model_dump(mode="json")
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        if "\\u0000" not in text:  # JSONB refuses NUL characters too
            return data
    return {_PACKED: base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")}


def decode_entry(data: dict[str, Any]) -> dict[str, Any]:
    packed = data.get(_PACKED)
    if isinstance(packed, str):
        return dict(json.loads(base64.b64decode(packed).decode("utf-8", "surrogatepass")))
    return data


async def save_context_state(
    pool: asyncpg.Pool,
    user_id: str,
    thread_id: str,
    agent_id: str | None,
    state: ContextState,
    changes: StateChanges,
) -> None:
    """Write the header and the changed entries of (user, thread, agent) in one transaction."""
    agent_key = agent_id or ""
    by_id = {e.id: e for e in state.entries}
    async with pool.acquire() as conn, conn.transaction():
        owner = None
        for _attempt in range(3):  # NULL when another session created the user concurrently: read it again
            owner = await conn.fetchval(_USER_ID_SQL, user_id)
            if owner is not None:
                break
        if owner is None:
            raise RuntimeError("could not save the context state: the user row could not be created")
        current = await conn.fetchval(_LOCK_HEADER_SQL, owner, thread_id, agent_key)
        # Another context object wrote this thread since we last did (two tabs on one thread): writing only
        # our changes would interleave two conversations, so rewrite ours whole (the last writer wins).
        replace_all = changes.replace_all or current is None or current != changes.revision
        if replace_all and current is not None and changes.revision is not None and not changes.replace_all:
            log.warning(
                "context %s/%s was saved by another writer; rewriting it with this one's state", thread_id, agent_key
            )
        changes.revision = await conn.fetchval(_HEADER_SQL, owner, thread_id, agent_key, state.header())
        if replace_all:
            await conn.execute(
                "DELETE FROM agent_memory_context_entries WHERE user_id = $1 AND thread_id = $2 AND agent_key = $3",
                owner,
                thread_id,
                agent_key,
            )
            upserts = list(by_id)
        else:
            if changes.deletes:
                await conn.execute(
                    """DELETE FROM agent_memory_context_entries
                       WHERE user_id = $1 AND thread_id = $2 AND agent_key = $3 AND entry_id = ANY($4::bigint[])""",
                    owner,
                    thread_id,
                    agent_key,
                    sorted(changes.deletes),
                )
            upserts = [i for i in sorted(changes.upserts) if i in by_id]
        if upserts:
            await conn.executemany(
                _UPSERT_ENTRY_SQL,
                [(owner, thread_id, agent_key, i, encode_entry(by_id[i])) for i in upserts],
            )


async def load_context_state(
    pool: asyncpg.Pool, user_id: str, thread_id: str, agent_id: str | None, changes: StateChanges | None = None
) -> ContextState | None:
    """The saved state of (user, thread, agent), or ``None``. Filters by user in SQL."""
    agent_key = agent_id or ""
    async with pool.acquire() as conn:
        row = await conn.fetchrow(_LOAD_HEADER_SQL, user_id, thread_id, agent_key)
        if row is None:
            return None
        if changes is not None:
            changes.clear()
            changes.revision = int(row["revision"])
        header = dict(row["state"])
        rows = await conn.fetch(_LOAD_ENTRIES_SQL, row["user_id"], thread_id, agent_key)
    legacy = header.pop("entries", None) or []  # states saved whole by earlier versions
    entries = [decode_entry(r["entry"]) for r in rows] if rows else legacy
    state = ContextState.model_validate({**header, "entries": entries})
    state.assign_ids()
    return state


async def delete_context_state(pool: asyncpg.Pool, user_id: str, thread_id: str, agent_id: str | None) -> None:
    """Delete the saved state (its entries go with it: ON DELETE CASCADE)."""
    await pool.execute(_DELETE_SQL, user_id, thread_id, agent_id or "")
