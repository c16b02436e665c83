"""How much of a shared server one user's parallel requests may take at once, per process.

Each request is bounded (statement timeouts, grep time limits), but a user who sends many at once could still
hold every pooled database connection or every core, and other users would wait for them. Work beyond a user's
slots waits for that user's earlier work, so a flood costs its sender time, not other users.

Example:
    >>> import asyncio
    >>> slots = PerUserSlots(2)
    >>> async def one() -> str:
    ...     async with slots.hold("alice"):
    ...         return "done"
    >>> asyncio.run(one())
    'done'
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class PerUserSlots:
    """At most ``limit`` pieces of work in flight per user; users with nothing in flight hold no entry."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._slots: dict[str, tuple[asyncio.Semaphore, int]] = {}

    @asynccontextmanager
    async def hold(self, user_id: str) -> AsyncIterator[None]:
        """Wait for one of the user's slots and hold it for the ``async with`` block."""
        semaphore, users = self._slots.get(user_id, (asyncio.Semaphore(self.limit), 0))
        self._slots[user_id] = (semaphore, users + 1)
        try:
            async with semaphore:
                yield
        finally:
            semaphore, users = self._slots[user_id]
            if users == 1:
                del self._slots[user_id]
            else:
                self._slots[user_id] = (semaphore, users - 1)

    def waiting(self, user_id: str) -> int:
        """How many of the user's requests wait for a slot now."""
        _semaphore, users = self._slots.get(user_id, (None, 0))
        return max(0, users - self.limit)
