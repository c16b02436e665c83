"""Named team specs in storage: the ``agents`` table (one row per name, the spec as JSONB).

What a spec means and how it is validated is the agents wing's business (:mod:`agent_memory.agents`); this
module only reads and writes the rows as plain JSON objects.
"""

from __future__ import annotations

import json
from typing import Any

from ._db import Database

_GET_SQL = "SELECT spec FROM agents WHERE name = $1"
_SAVE_SQL = """
INSERT INTO agents (name, description, spec) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description, spec = EXCLUDED.spec, updated_at = now()
"""
_LIST_SQL = "SELECT name, description, updated_at FROM agents ORDER BY name"


class TeamSpecStore:
    """Read, write and list the specs saved in the ``agents`` table (specs are not per user)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, name: str) -> dict[str, Any] | None:
        """The spec saved under ``name`` as a JSON object, or None."""
        found = await self.db.pool.fetchval(_GET_SQL, name)
        if found is None:
            return None
        data: dict[str, Any] = json.loads(found) if isinstance(found, str) else found
        return data

    async def save(self, name: str, description: str, spec: dict[str, Any]) -> None:
        """Insert or replace the spec saved under ``name``."""
        await self.db.pool.execute(_SAVE_SQL, name, description, spec)  # the pool encodes jsonb with json.dumps

    async def summaries(self) -> list[dict[str, Any]]:
        """Every saved spec's name, description and ``updated_at``, by name."""
        return [dict(r) for r in await self.db.pool.fetch(_LIST_SQL)]
