"""How a row belongs to a user: the one place that turns a user's identifier into SQL.

Every table with per-user rows has a ``user_id`` column referencing Chainlit's ``"User".id``; callers only
know the identifier (the login name). A store statement reaches a user's rows in one of two ways, both built
here, so the rule "every read path filters by user in SQL" is written once and a key of another user matches no
row, exactly like a key that does not exist:

* it filters with :func:`owned_by` (the identifier, resolved inside the statement) - most reads, updates and
  deletes of the store;
* or it is handed the ``"User".id`` resolved just before by :func:`find_user_pk` / :func:`ensure_user_pk` (or
  :data:`ENSURE_USER_CTES` in the same statement) and filters or writes with that - inserts, writes that
  create the user on first use (memories, saved-context entries, skills, tokens, credentials), and searches.

The search wing never sees identifiers: the store hands it the resolved ``"User".id``.

Example:
    >>> owned_by("m")
    'm.user_id = (SELECT id FROM "User" WHERE identifier = $1)'
    >>> owned_by("t", "$3")
    't.user_id = (SELECT id FROM "User" WHERE identifier = $3)'
"""

from __future__ import annotations

import asyncpg
from asyncpg.pool import PoolConnectionProxy


def user_pk(param: str = "$1") -> str:
    """A scalar subquery: the ``"User".id`` of the identifier bound to ``param`` (NULL when there is none)."""
    return f'(SELECT id FROM "User" WHERE identifier = {param})'


def owned_by(alias: str, param: str = "$1") -> str:
    """The condition "row ``alias`` belongs to the user whose identifier is bound to ``param``".

    A scalar subquery rather than a join: PostgreSQL evaluates it once (an InitPlan), then uses the
    ``user_id`` indexes, and it reads the same in SELECT, UPDATE and DELETE statements.
    """
    return f"{alias}.user_id = {user_pk(param)}"


# The user's id, creating the "User" row on first use (stores and saved contexts may come before any login).
# Concurrent creators: ON CONFLICT DO NOTHING returns no row to the loser, so the result is NULL and the
# caller reads it again (the row exists by then). ENSURE_USER_CTES + ENSURED_USER_PK let a statement create
# the user and write its own row in one round trip (``WITH {ENSURE_USER_CTES} INSERT ... SELECT {ENSURED_USER_PK}``).
ENSURE_USER_CTES = """found AS (SELECT id FROM "User" WHERE identifier = $1),
created AS (
    INSERT INTO "User" (identifier) SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM found)
    ON CONFLICT (identifier) DO NOTHING RETURNING id
)"""
ENSURED_USER_PK = "coalesce((SELECT id FROM found), (SELECT id FROM created))"
ENSURE_USER_SQL = f"WITH {ENSURE_USER_CTES}\nSELECT {ENSURED_USER_PK}"

_FIND_USER_SQL = f"SELECT {user_pk()}"


# One statement runs the same on a pool, a connection, or a pooled connection inside a transaction.
Queryable = asyncpg.Pool | asyncpg.Connection | PoolConnectionProxy


async def find_user_pk(db: Queryable, identifier: str) -> str | None:
    """The ``"User".id`` of ``identifier``, or None when there is no such user."""
    found = await db.fetchval(_FIND_USER_SQL, identifier)
    return None if found is None else str(found)


async def ensure_user_pk(db: Queryable, identifier: str) -> str:
    """The ``"User".id`` of ``identifier``, creating the user when needed (safe against concurrent creators).

    NULL means another session created the user between our read and our insert: read (or create) again.
    """
    for _attempt in range(3):
        created = await db.fetchval(ENSURE_USER_SQL, identifier)
        if created is not None:
            return str(created)
    raise RuntimeError(f"the user row of {identifier!r} could not be created")
