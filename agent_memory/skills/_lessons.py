"""Lessons from failures: "when a task like this fails with that error, do this instead", kept as memories.

A lesson is a ``lesson`` memory of the store (tagged failure-derived, owned by one user and agent), so it is
found by the store's own search and shown to the agent next to matching skills. :class:`LessonMemory` is the part
of :class:`~agent_memory.skills.ProceduralMemory` that records, recalls and prunes them.

Example:
    >>> error_summary("Traceback (most recent call last):\\n  ...\\nNameError: name 'rnage' is not defined")
    "NameError: name 'rnage' is not defined"
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from ..errors import MemoryNotFound
from ..store import MemoryStore
from ._models import LESSON_TAG, Lesson, SkillError

_ERROR_LINE = re.compile(r"(error|exception|traceback|failed|fatal|denied|not found|no such)", re.IGNORECASE)


def error_summary(output: str, limit: int = 300) -> str | None:
    """The last error-looking line of an output (else its last line), clipped."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    errors = [ln for ln in lines if _ERROR_LINE.search(ln)]
    return clip((errors or lines)[-1], limit)


def clip(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis marks the cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class LessonMemory:
    """Failure-derived lessons of one user with one agent (``lesson`` memories in the store)."""

    store: MemoryStore
    user_id: str
    agent_id: str

    async def record_failure_lesson(
        self, task: str, error: str, fix: str, *, thread_id: str | None = None, tags: Sequence[str] = ()
    ) -> str:
        """Store "when ``task`` fails with ``error``, do ``fix``" as a ``lesson`` memory tagged failure-derived.

        Returns the lesson's memory key; the same lesson recorded again returns the existing key.
        """
        for value, what in ((task, "task"), (fix, "fix")):
            if not isinstance(value, str) or not value.strip():
                raise SkillError(f"a lesson needs a non-empty {what}")
        error_line = error_summary(error or "") or ""
        content = f"When: {task.strip()}\nError: {error_line}\nDo: {fix.strip()}\n"
        sha = hashlib.sha256(content.encode("utf-8")).hexdigest()
        for item in await self.store.list(user_id=self.user_id, memory_type="lesson", agent_id=self.agent_id,
                                          limit=10_000):  # fmt: skip
            if item.content_sha256 == sha:
                return item.memory_key
        return await self.store.store(
            content, user_id=self.user_id, agent_id=self.agent_id, thread_id=thread_id, memory_type="lesson",
            description=f"Lesson: when {clip(task, 120)} -> {clip(fix, 120)}",
            metadata={"tags": [LESSON_TAG, *tags], "task": task.strip()[:2000], "error": error_line,
                      "fix": fix.strip()[:2000], "source": "skills"},
        )  # fmt: skip

    async def recall_lessons(self, task: str, *, limit: int = 3) -> list[Lesson]:
        """Failure-derived lessons of this agent and user relevant to ``task``, best first."""
        items = await self.store.search(task, user_id=self.user_id, limit=min(100, limit * 5), memory_type="lesson")
        out: list[Lesson] = []
        for item in items:
            meta = item.metadata
            if item.agent_id != self.agent_id or LESSON_TAG not in (meta.get("tags") or []):
                continue
            out.append(Lesson(key=item.memory_key, when=str(meta.get("task", "")), error=str(meta.get("error", "")),
                              do=str(meta.get("fix", "")), score=item.score, created_at=item.created_at))  # fmt: skip
        return out[:limit]

    async def prune_lessons(self, *, older_than_days: float = 180, as_of: datetime | None = None) -> list[str]:
        """Delete this agent's failure-derived lessons created and last recalled before the cutoff."""
        cutoff = (as_of or datetime.now(UTC)) - timedelta(days=older_than_days)
        items = await self.store.list(user_id=self.user_id, memory_type="lesson", agent_id=self.agent_id,
                                      limit=10_000)  # fmt: skip
        doomed = [
            i.memory_key for i in items
            if LESSON_TAG in (i.metadata.get("tags") or []) and i.created_at < cutoff
            and (i.last_accessed_at is None or i.last_accessed_at < cutoff)
        ]  # fmt: skip
        for key in doomed:
            try:
                await self.store.delete(key, user_id=self.user_id)
            except MemoryNotFound:
                pass
        return doomed
