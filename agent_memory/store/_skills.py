"""Every SQL statement on skills (tables ``skills``, ``skill_versions``): rows in, rows out as dicts.

A skill belongs to one ``(user, agent)`` pair and only that pair's rows are ever reached, so another user's or
agent's skill behaves exactly like a missing one. Reads, updates and deletes by name filter with
:func:`._scoping.owned_by` (the login name); :meth:`SkillStore.write` resolves (or creates) the user's row id, finds
the pair's row with it and then updates that row by its id; :meth:`SkillStore.search` resolves the row id and hands
it, with its connection, to :func:`agent_memory.search.rank_skills`. The skills wing (:mod:`agent_memory.skills`)
validates and builds its models.

Example:
    >>> import asyncio
    >>> from agent_memory import MemoryStore
    >>> from agent_memory.store import SkillStore
    >>> async def main() -> list[tuple[str, str]]:
    ...     async with await MemoryStore.open() as store:   # embedded PostgreSQL unless a URL is set
    ...         skills = SkillStore(store.db.pool)              # what agent_memory.skills.SkillRegistry uses
    ...         skill = {"name": "count_words", "description": "Count the words of a text file",
    ...                  "code": 'wc -w "$1"', "language": "bash", "parameters": {"type": "object"},
    ...                  "example_prompts": ["how many words are in notes.txt"], "tags": ["text"],
    ...                  "status": "active", "source": "user", "metadata": {"fingerprint": "v1"}}
    ...         written = await skills.write("alice", "coder", skill)
    ...         found = await skills.search("alice", "coder", "count the words of report.txt",
    ...                                     statuses=["active"], embedder=None)
    ...         return [(written.action, row["name"]) for row in found]
    >>> asyncio.run(main())  # doctest: +SKIP
    [('created', 'count_words')]
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg

from ..search import SKILL_COLUMNS, Embedder, rank_skills
from ._scoping import ensure_user_pk, find_user_pk, owned_by

_OWNED = f"{owned_by('s')} AND s.agent_id = $2"  # $1 user identifier, $2 agent
_PRUNE_DELETE_SQL = f"DELETE FROM skills s WHERE {owned_by('s')} AND s.id = ANY($2::uuid[])"  # $2 skill ids

WriteAction = Literal["created", "new_version", "unchanged", "limit_reached"]


@dataclass(frozen=True)
class SkillWrite:
    """What :meth:`SkillStore.write` did; ``row`` is the skill after it (None when the limit was reached)."""

    action: WriteAction
    row: dict[str, Any] | None
    count: int = 0  # the pair's skills, when the limit was reached


def merged(first: Sequence[str], second: Sequence[str], limit: int) -> list[str]:
    """``first`` then ``second`` without repeats, at most ``limit`` (both lists are already clean)."""
    return list(dict.fromkeys([*first, *second]))[:limit]


class SkillStore:
    """The skills of every user and agent; each method takes the owner pair and filters by it in SQL."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def write(
        self,
        user_id: str,
        agent_id: str,
        skill: dict[str, Any],
        *,
        max_skills: int = 0,
        max_list_items: int = 20,
    ) -> SkillWrite:
        """Insert the skill, or make a new version when ``metadata["fingerprint"]`` (its content) changed.

        ``skill`` holds the columns ``name, description, code, language, parameters, example_prompts, tags,
        status, source, metadata``, already validated (lists already clean: merging only drops repeats).

        Same content: ``unchanged`` (new example prompts and tags are merged in). A new version starts with zero
        runs (the old version's counts stay in its history) and takes ``status``, except that a rejected or
        disabled skill stays so. Every created version is also written to ``skill_versions``.
        """
        name, description, code, language = skill["name"], skill["description"], skill["code"], skill["language"]
        parameters, example_prompts, tags = skill["parameters"], skill["example_prompts"], skill["tags"]
        status, source, metadata = skill["status"], skill["source"], skill["metadata"]
        async with self.pool.acquire() as conn, conn.transaction():
            uid = await ensure_user_pk(conn, user_id)
            # Serialise registrations of one (user, agent): the limit check and the version bump must not race.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1 || chr(31) || $2))", uid, agent_id)
            row = await conn.fetchrow(
                f"SELECT {SKILL_COLUMNS} FROM skills s WHERE s.user_id = $1 AND s.agent_id = $2 AND s.name = $3",
                uid, agent_id, name,
            )  # fmt: skip
            action: WriteAction
            if row is None:
                if max_skills:
                    count = await conn.fetchval(
                        "SELECT count(*) FROM skills WHERE user_id = $1 AND agent_id = $2", uid, agent_id
                    )
                    if count >= max_skills:
                        return SkillWrite("limit_reached", None, count)
                row = await conn.fetchrow(
                    f"""INSERT INTO skills AS s (user_id, agent_id, name, description, code, language, parameters,
                            example_prompts, tags, status, source, metadata)
                        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                        RETURNING {SKILL_COLUMNS}""",
                    uid, agent_id, name, description, code, language, parameters, example_prompts, tags, status,
                    source, metadata,
                )  # fmt: skip
                action = "created"
            elif (row["metadata"] or {}).get("fingerprint") == metadata.get("fingerprint"):
                row = await conn.fetchrow(
                    f"""UPDATE skills s SET example_prompts = $2, tags = $3, updated_at = now() WHERE s.id = $1
                        RETURNING {SKILL_COLUMNS}""",
                    row["id"], merged(row["example_prompts"], example_prompts, max_list_items),
                    merged(row["tags"], tags, max_list_items),
                )  # fmt: skip
                action = "unchanged"
            else:
                await conn.execute(
                    "UPDATE skill_versions SET execution_count = $3, success_count = $4 "
                    "WHERE skill_id = $1 AND version = $2",
                    row["id"], row["version"], row["execution_count"], row["success_count"],
                )  # fmt: skip
                row = await conn.fetchrow(
                    f"""UPDATE skills s SET description = $2, code = $3, language = $4, parameters = $5,
                            example_prompts = $6, tags = $7, status = $8, source = $9, metadata = $10,
                            version = s.version + 1, execution_count = 0, success_count = 0, last_error = NULL,
                            updated_at = now()
                        WHERE s.id = $1 RETURNING {SKILL_COLUMNS}""",
                    row["id"], description, code, language, parameters,
                    merged(example_prompts, row["example_prompts"], max_list_items),
                    merged(tags, row["tags"], max_list_items),
                    # An operator's "rejected" / "disabled" holds for new versions too: re-registering is no way
                    # around it (approve brings the skill back).
                    row["status"] if row["status"] in ("rejected", "disabled") else status, source, metadata,
                )  # fmt: skip
                action = "new_version"
            assert row is not None
            if action != "unchanged":
                await conn.execute(
                    """INSERT INTO skill_versions (skill_id, version, description, code, language, parameters,
                           example_prompts, tags, source) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
                    row["id"], row["version"], row["description"], row["code"], row["language"], row["parameters"],
                    list(row["example_prompts"]), list(row["tags"]), row["source"],
                )  # fmt: skip
        return SkillWrite(action, dict(row))

    async def get(self, user_id: str, agent_id: str, name: str) -> dict[str, Any] | None:
        row = await self.pool.fetchrow(
            f"SELECT {SKILL_COLUMNS} FROM skills s WHERE {_OWNED} AND s.name = $3", user_id, agent_id, name
        )
        return dict(row) if row is not None else None

    async def versions(self, user_id: str, agent_id: str, name: str) -> builtins.list[dict[str, Any]]:
        """The skill's version rows, oldest first."""
        rows = await self.pool.fetch(
            f"""SELECT v.* FROM skill_versions v JOIN skills s ON s.id = v.skill_id
                WHERE {_OWNED} AND s.name = $3 ORDER BY v.version""",
            user_id, agent_id, name,
        )  # fmt: skip
        return [dict(r) for r in rows]

    async def list(
        self, user_id: str, agent_id: str | None, *, status: str | None, limit: int
    ) -> builtins.list[dict[str, Any]]:
        """The user's skills (of one agent, or of all when ``agent_id`` is None), by agent then name."""
        rows = await self.pool.fetch(
            f"""SELECT {SKILL_COLUMNS} FROM skills s
                WHERE {owned_by("s")} AND ($2::text IS NULL OR s.agent_id = $2) AND ($3::text IS NULL OR s.status = $3)
                ORDER BY s.agent_id, s.name LIMIT $4""",
            user_id, agent_id, status, limit,
        )  # fmt: skip
        return [dict(r) for r in rows]

    async def search(
        self, user_id: str, agent_id: str, query: str, *, statuses: Sequence[str], embedder: Embedder | None
    ) -> builtins.list[dict[str, Any]]:
        """Rows with ``relevance`` (see :func:`agent_memory.search.rank_skills`), scoped to the pair."""
        # The user is resolved on the connection the ranking then uses: one pool checkout per search.
        async with self.pool.acquire() as conn:
            owner = await find_user_pk(conn, user_id)
            if owner is None:
                return []  # no such user: no skills
            return await rank_skills(
                conn, query, user_pk=owner, agent_id=agent_id, statuses=statuses, embedder=embedder
            )

    async def set_status(self, user_id: str, agent_id: str, name: str, status: str) -> dict[str, Any] | None:
        row = await self.pool.fetchrow(
            f"""UPDATE skills s SET status = $4, updated_at = now() WHERE {_OWNED} AND s.name = $3
                RETURNING {SKILL_COLUMNS}""",
            user_id, agent_id, name, status,
        )  # fmt: skip
        return dict(row) if row is not None else None

    async def record_run(
        self, user_id: str, agent_id: str, name: str, version: int, *, success: bool, error: str | None
    ) -> None:
        """Count one run of ``version`` (a run of a version replaced meanwhile only lands in its history)."""
        updated = await self.pool.fetchval(
            f"""UPDATE skills s SET execution_count = s.execution_count + 1,
                       success_count = s.success_count + $5::boolean::int, last_used_at = now(),
                       last_error = CASE WHEN $5::boolean THEN s.last_error ELSE $6 END
                WHERE {_OWNED} AND s.name = $3 AND s.version = $4 RETURNING 1""",
            user_id, agent_id, name, version, success, error,
        )  # fmt: skip
        if updated is None:
            await self.pool.execute(
                f"""UPDATE skill_versions v SET execution_count = v.execution_count + 1,
                           success_count = v.success_count + $5::boolean::int
                    FROM skills s WHERE s.id = v.skill_id AND {_OWNED} AND s.name = $3 AND v.version = $4""",
                user_id, agent_id, name, version, success,
            )  # fmt: skip

    async def delete(self, user_id: str, agent_id: str, name: str) -> bool:
        """Delete the skill (its versions and vectors go with it); False when the pair has no such skill."""
        deleted = await self.pool.fetchval(
            f"DELETE FROM skills s WHERE {_OWNED} AND s.name = $3 RETURNING 1", user_id, agent_id, name
        )
        return deleted is not None

    async def prune(
        self,
        user_id: str,
        agent_id: str | None,
        *,
        unused_before: datetime | None,
        min_success_rate: float | None,
        min_executions: int,
        dry_run: bool,
    ) -> builtins.list[dict[str, Any]]:
        """Delete (unless ``dry_run``) and return the skills last used (or, never used, created) before
        ``unused_before``, and those whose success rate over at least ``min_executions`` runs is below
        ``min_success_rate``."""
        rows = await self.pool.fetch(
            f"""SELECT {SKILL_COLUMNS} FROM skills s
                WHERE {owned_by("s")} AND ($2::text IS NULL OR s.agent_id = $2)
                  AND (($3::timestamptz IS NOT NULL AND coalesce(s.last_used_at, s.created_at) < $3)
                       OR ($4::float8 IS NOT NULL AND s.execution_count >= $5
                           AND s.success_count::float8 / s.execution_count < $4))
                ORDER BY s.agent_id, s.name""",
            user_id, agent_id, unused_before, min_success_rate, min_executions,
        )  # fmt: skip
        if rows and not dry_run:
            # The ids come from the owned SELECT above; the owner filter holds here too, so this statement alone
            # can never delete another user's skill.
            await self.pool.execute(_PRUNE_DELETE_SQL, user_id, [r["id"] for r in rows])
        return [dict(r) for r in rows]
