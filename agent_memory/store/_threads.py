"""Chainlit's threads, seen from agent-memory: who owns one (or a step, or a feedback), and the saved agent
contexts that go with it.

Chainlit's own data layer deletes the thread (its steps and elements cascade); the saved contexts
(``agent_memory_contexts``) are agent-memory's and are dropped here. The thread's memories stay: they belong
to the user (inspector, search) until deleted there.
"""

from __future__ import annotations

from ._db import Database
from ._scoping import owned_by

_OWNER_SQL = 'SELECT u.identifier FROM "Thread" t JOIN "User" u ON u.id = t."userId" WHERE t.id = $1'
# The owner of a chat step's thread, and the thread (a step never moves between threads); of a feedback's step.
_STEP_SQL = """SELECT s."threadId" AS thread_id, u.identifier AS owner FROM "Step" s
               LEFT JOIN "Thread" t ON t.id = s."threadId" LEFT JOIN "User" u ON u.id = t."userId" WHERE s.id = $1"""
_FEEDBACK_OWNER_SQL = """SELECT u.identifier FROM "Feedback" f JOIN "Step" s ON s.id = f."stepId"
                         JOIN "Thread" t ON t.id = s."threadId" JOIN "User" u ON u.id = t."userId" WHERE f.id = $1"""
_DELETE_CONTEXTS_SQL = f"DELETE FROM agent_memory_contexts c WHERE {owned_by('c')} AND c.thread_id = $2"


class ThreadStore:
    """The owner of a thread and the saved contexts of its agents."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def owner(self, thread_id: str) -> str | None:
        """The identifier of the user who owns ``thread_id``, or None (no such thread, or no owner)."""
        found = await self.db.pool.fetchval(_OWNER_SQL, thread_id)
        return None if found is None else str(found)

    async def step(self, step_id: str) -> tuple[str | None, str | None] | None:
        """``(thread id, owner)`` of a chat step, or None when there is no such step."""
        row = await self.db.pool.fetchrow(_STEP_SQL, step_id)
        return None if row is None else (row["thread_id"], row["owner"])

    async def feedback_owner(self, feedback_id: str) -> str | None:
        """The identifier of the user whose message a feedback is on, or None (no such feedback)."""
        found = await self.db.pool.fetchval(_FEEDBACK_OWNER_SQL, feedback_id)
        return None if found is None else str(found)

    async def delete_saved_contexts(self, thread_id: str, *, user_id: str) -> None:
        """Drop every saved agent context of ``user_id`` in ``thread_id`` (their entries cascade)."""
        await self.db.pool.execute(_DELETE_CONTEXTS_SQL, user_id, thread_id)
