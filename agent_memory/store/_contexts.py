"""Saved conversation states of a MemoryContext: tables ``agent_memory_contexts`` and ``..._entries``.

A state is keyed by (user, thread, agent) and saved as a header (a JSON object: everything but the messages)
plus one row per entry (a JSON object each, keyed by its integer id), so a save writes only what changed.
This module knows nothing of the context's models: it stores and returns plain JSON-ready dicts.

Saves are revision-checked: each save bumps the header's ``revision``; a writer whose last known revision is
not the stored one (another context object wrote the same thread: two tabs) rewrites its state whole, so two
conversations never interleave (the last writer wins).

Example:
    >>> decode_entry(encode_entry({"message": {"content": "a\\x00b"}}))
    {'message': {'content': 'a\\x00b'}}
    >>> encode_entry({"message": {"content": "plain"}})
    {'message': {'content': 'plain'}}
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._db import Database
from ._scoping import ensure_user_pk, owned_by

log = logging.getLogger(__name__)

_LOCK_HEADER_SQL = """
SELECT revision FROM agent_memory_contexts WHERE user_id = $1 AND thread_id = $2 AND agent_key = $3 FOR UPDATE
"""

_UPSERT_HEADER_SQL = """
INSERT INTO agent_memory_contexts (user_id, thread_id, agent_key, state, revision, updated_at)
VALUES ($1, $2, $3, $4, 1, now())
ON CONFLICT (user_id, thread_id, agent_key)
DO UPDATE SET state = EXCLUDED.state, revision = agent_memory_contexts.revision + 1, updated_at = now()
RETURNING revision
"""

_DELETE_ALL_ENTRIES_SQL = """
DELETE FROM agent_memory_context_entries WHERE user_id = $1 AND thread_id = $2 AND agent_key = $3
"""

_DELETE_ENTRIES_SQL = """
DELETE FROM agent_memory_context_entries
WHERE user_id = $1 AND thread_id = $2 AND agent_key = $3 AND entry_id = ANY($4::bigint[])
"""

_UPSERT_ENTRY_SQL = """
INSERT INTO agent_memory_context_entries (user_id, thread_id, agent_key, entry_id, entry)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (user_id, thread_id, agent_key, entry_id) DO UPDATE SET entry = EXCLUDED.entry
"""

_LOAD_HEADER_SQL = f"""
SELECT c.user_id, c.state, c.revision FROM agent_memory_contexts c
WHERE {owned_by("c")} AND c.thread_id = $2 AND c.agent_key = $3
"""

_LOAD_ENTRIES_SQL = """
SELECT entry FROM agent_memory_context_entries
WHERE user_id = $1 AND thread_id = $2 AND agent_key = $3 ORDER BY entry_id
"""

_DELETE_STATE_SQL = f"""
DELETE FROM agent_memory_contexts c WHERE {owned_by("c")} AND c.thread_id = $2 AND c.agent_key = $3
"""

_PACKED = "utf8_surrogatepass_b64"


def encode_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as JSONB. One with NUL characters or lone surrogates (valid in a Python ``str``, refused by
    JSONB) is packed as base64 of its JSON text, so the state still saves and loads exactly."""
    text = json.dumps(entry, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        if "\\u0000" not in text:  # JSONB refuses NUL characters too
            return entry
    return {_PACKED: base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")}


def decode_entry(data: dict[str, Any]) -> dict[str, Any]:
    """An entry as :func:`encode_entry` got it."""
    packed = data.get(_PACKED)
    if isinstance(packed, str):
        return dict(json.loads(base64.b64decode(packed).decode("utf-8", "surrogatepass")))
    return data


@dataclass
class SavedContext:
    """A saved state as it was loaded: its header, its entries (oldest first) and its revision."""

    header: dict[str, Any]
    entries: list[dict[str, Any]]
    revision: int


class ContextStates:
    """Save, load and delete the conversation states of (user, thread, agent); every statement is user-scoped.

    ``agent_id`` ``None`` is stored as the empty agent key.
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    async def save(
        self,
        user_id: str,
        thread_id: str,
        agent_id: str | None,
        *,
        header: dict[str, Any],
        entries: Mapping[int, dict[str, Any]],
        changed: Iterable[int],
        deleted: Iterable[int],
        replace_all: bool,
        revision: int | None,
    ) -> int:
        """Write ``header`` and the ``changed`` entries, delete the ``deleted`` ones, in one transaction.

        ``entries`` maps every entry id of the state to its JSON (read lazily: only the ids written are looked
        up). Everything is rewritten when ``replace_all``, when nothing was saved yet, or when the stored
        revision is not ``revision`` (another writer). Returns the new revision.
        """
        agent_key = agent_id or ""
        async with self.db.pool.acquire() as conn, conn.transaction():
            owner = await ensure_user_pk(conn, user_id)
            current = await conn.fetchval(_LOCK_HEADER_SQL, owner, thread_id, agent_key)
            # Another context object wrote this thread since we last did (two tabs on one thread): writing only
            # our changes would interleave two conversations, so rewrite ours whole (the last writer wins).
            rewrite = replace_all or current is None or current != revision
            if rewrite and current is not None and revision is not None and not replace_all:
                log.warning(
                    "context %s/%s was saved by another writer; rewriting it with this one's state",
                    thread_id,
                    agent_key,
                )
            new_revision = int(await conn.fetchval(_UPSERT_HEADER_SQL, owner, thread_id, agent_key, header))
            if rewrite:
                await conn.execute(_DELETE_ALL_ENTRIES_SQL, owner, thread_id, agent_key)
                upserts = list(entries)
            else:
                gone = sorted(deleted)
                if gone:
                    await conn.execute(_DELETE_ENTRIES_SQL, owner, thread_id, agent_key, gone)
                upserts = [i for i in sorted(changed) if i in entries]
            if upserts:
                await conn.executemany(
                    _UPSERT_ENTRY_SQL,
                    [(owner, thread_id, agent_key, i, encode_entry(entries[i])) for i in upserts],
                )
        return new_revision

    async def load(self, user_id: str, thread_id: str, agent_id: str | None) -> SavedContext | None:
        """The saved state of (user, thread, agent), or ``None`` (also for another user's thread)."""
        agent_key = agent_id or ""
        async with self.db.pool.acquire() as conn:
            row = await conn.fetchrow(_LOAD_HEADER_SQL, user_id, thread_id, agent_key)
            if row is None:
                return None
            rows = await conn.fetch(_LOAD_ENTRIES_SQL, row["user_id"], thread_id, agent_key)
        return SavedContext(
            header=dict(row["state"]),
            entries=[decode_entry(r["entry"]) for r in rows],
            revision=int(row["revision"]),
        )

    async def delete(self, user_id: str, thread_id: str, agent_id: str | None) -> None:
        """Delete the saved state (its entries go with it: ON DELETE CASCADE)."""
        await self.db.pool.execute(_DELETE_STATE_SQL, user_id, thread_id, agent_id or "")
