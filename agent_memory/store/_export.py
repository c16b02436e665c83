"""A user's memories as JSON Lines, and back: content byte for byte, metadata, versions, validity and status.

The first line is a header (``format``, ``format_version``, ``user``, ``exported_at``, ``memories``); each further
line is one memory with its earlier versions. Importing keeps every field (keys, times, versions), so exporting
the imported user again gives the same memory lines. Import is one transaction: all memories or none.

Example:
    >>> import json
    >>> header = json.loads(export_header("alice", 2))
    >>> header["format"], header["memories"]
    ('agent-memory/export', 2)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import asyncpg

from ..placeholders import is_valid_key
from ..tokens import count_tokens
from ..validation import check_content, check_description, check_identifier, check_memory_type, check_metadata
from ._lifecycle import record
from ._rows import decode_content, encode_content
from ._scoping import ensure_user_pk, find_user_pk

if TYPE_CHECKING:
    from ._store import MemoryStore

FORMAT = "agent-memory/export"
FORMAT_VERSION = 1

_EXPORT_SQL = """
SELECT m.id, m.memory_key, m.memory_type, m.description, m.content, m.content_encoding, m.content_metadata,
       m.agent_id, m.thread_id, m.token_count, m.content_sha256, m.created_at, m.updated_at, m.version, m.status,
       m.status_reason, m.subject, m.valid_from, m.valid_until, m.expires_at, m.is_active
FROM agent_memories m WHERE m.user_id = $1 AND (m.expires_at IS NULL OR m.expires_at > now())
ORDER BY m.created_at, m.memory_key
"""
_EXPORT_VERSIONS_SQL = """
SELECT version, memory_type, description, content, content_encoding, content_metadata, token_count,
       content_sha256, written_at, actor, surface
FROM agent_memory_versions WHERE memory_id = $1 AND user_id = $2 ORDER BY version
"""
_EXISTING_KEYS_SQL = "SELECT memory_key FROM agent_memories WHERE user_id = $1 AND memory_key = ANY($2::text[])"
_IMPORT_SQL = """
INSERT INTO agent_memories (user_id, memory_key, memory_type, description, content, content_encoding,
    content_metadata, token_count, char_count, content_sha256, agent_id, thread_id, created_at, updated_at, version,
    status, status_reason, subject, valid_from, valid_until, expires_at, is_active)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)
RETURNING id
"""
_IMPORT_VERSION_SQL = """
INSERT INTO agent_memory_versions (memory_id, version, memory_type, description, content, content_encoding,
    content_metadata, token_count, char_count, content_sha256, written_at, actor, surface, user_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
"""
_TIMES = ("created_at", "updated_at", "valid_from", "valid_until", "expires_at")


def export_header(user_id: str, count: int) -> str:
    exported_at = datetime.now(UTC).isoformat()
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "user": user_id, "exported_at": exported_at}
    return json.dumps({**header, "memories": count}, ensure_ascii=False)


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


async def export_lines(store: MemoryStore, user_id: str) -> AsyncIterator[str]:
    """The header, then one JSON line per memory of ``user_id`` (oldest first). Expired memories are left out."""
    async with store.db.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        owner = await find_user_pk(conn, user_id)
        rows = [] if owner is None else await conn.fetch(_EXPORT_SQL, owner)
        yield export_header(user_id, len(rows))
        for r in rows:
            versions = []
            if r["version"] > 1:
                for v in await conn.fetch(_EXPORT_VERSIONS_SQL, r["id"], owner):
                    versions.append({
                        "version": v["version"], "memory_type": v["memory_type"], "description": v["description"],
                        "content": decode_content(v["content"], v["content_encoding"]),
                        "metadata": v["content_metadata"], "token_count": v["token_count"],
                        "content_sha256": v["content_sha256"], "written_at": _time(v["written_at"]),
                        "actor": v["actor"], "surface": v["surface"],
                    })  # fmt: skip
            line = {
                "key": r["memory_key"], "memory_type": r["memory_type"], "description": r["description"],
                "content": decode_content(r["content"], r["content_encoding"]), "metadata": r["content_metadata"],
                "agent_id": r["agent_id"], "thread_id": r["thread_id"], "token_count": r["token_count"],
                "content_sha256": r["content_sha256"], "version": r["version"], "status": r["status"],
                "status_reason": r["status_reason"], "subject": r["subject"], "current": r["is_active"],
                **{name: _time(r[name]) for name in _TIMES}, "versions": versions,
            }  # fmt: skip
            yield json.dumps(line, ensure_ascii=False)


_PAST_TIMES = ("created_at", "updated_at", "valid_from")  # when something happened: never later than now
_CLOCK_SKEW = timedelta(days=1)  # another machine's clock may run ahead


def _checked_version(record_no: int, value: Any, versions: list[dict[str, Any]]) -> int:
    """The current version number: a positive integer above each earlier version's, which are distinct."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"line {record_no}: version {value!r} is not a positive integer")
    earlier = [v.get("version") for v in versions]
    if len(set(earlier)) != len(earlier) or not all(
        isinstance(e, int) and not isinstance(e, bool) and 1 <= e < value for e in earlier
    ):
        raise ValueError(f"line {record_no}: earlier versions must be distinct numbers from 1 below version {value}")
    return value


def _parse_time(record_no: int, name: str, value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise ValueError(f"line {record_no}: {name} {value!r} is not an ISO date/time") from None
    if parsed.tzinfo is None:
        raise ValueError(f"line {record_no}: {name} {value!r} has no timezone")
    return parsed


def _checked_content(line_no: int, item: dict[str, Any], max_bytes: int) -> tuple[str, str, str, int]:
    """(stored text, encoding, sha256, chars) of an exported content, refusing one whose hash does not match."""
    content = item.get("content")
    if not isinstance(content, str):
        raise ValueError(f"line {line_no}: content must be a string")
    raw = check_content(content, max_bytes)
    sha = hashlib.sha256(raw).hexdigest()
    if item.get("content_sha256") not in (None, sha):
        raise ValueError(f"line {line_no}: content does not match its content_sha256 (the file was altered)")
    stored, encoding = encode_content(content)
    return stored, encoding, sha, len(content)


def parse_export(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The memory records of an export, after checking its header. Raises ``ValueError`` naming the bad line."""
    records: list[dict[str, Any]] = []
    header_seen = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number} is not JSON: {exc.msg}") from None
        if not isinstance(value, dict):
            raise ValueError(f"line {number} is not a JSON object")
        if not header_seen:
            if value.get("format") != FORMAT or value.get("format_version") != FORMAT_VERSION:
                raise ValueError(f"line {number} is not an {FORMAT} version {FORMAT_VERSION} header")
            header_seen = True
            continue
        value["_line"] = number
        records.append(value)
    if not header_seen:
        raise ValueError("the file is empty: expected an agent-memory export (JSON Lines with a header line)")
    return records


async def import_records(
    store: MemoryStore, records: list[dict[str, Any]], *, user_id: str, actor: str | None, surface: str
) -> list[str]:
    """Insert ``records`` (from :func:`parse_export`) as memories of ``user_id`` in one transaction; their keys.

    Refuses (``ValueError``) when the user already has one of the keys, or a record is malformed.
    """
    max_bytes = store.settings.max_content_bytes
    keys = [r.get("key") for r in records]
    for r, key in zip(records, keys, strict=True):
        if not isinstance(key, str) or not is_valid_key(key):
            raise ValueError(f"line {r['_line']}: {key!r} is not a memory key")
    if len(set(keys)) != len(keys):
        raise ValueError("the file holds the same key twice")
    async with store.db.pool.acquire() as conn, conn.transaction():
        owner = await ensure_user_pk(conn, user_id)
        taken = [row["memory_key"] for row in await conn.fetch(_EXISTING_KEYS_SQL, owner, keys)]
        if taken:
            raise ValueError(
                f"{user_id!r} already has {len(taken)} of these keys ({', '.join(sorted(taken)[:5])}): import into "
                "another user, or delete those memories first"
            )
        for r in records:
            await _insert_one(conn, owner, r, max_bytes, store.settings.token_model)
            await record(conn, owner, r["key"], "import", actor, surface)
    if store.embeddings is not None:
        for key in keys:
            store.embeddings.enqueue(user_pk=owner, memory_key=str(key))
    return [str(k) for k in keys]


async def _insert_one(conn: Any, owner: str, r: dict[str, Any], max_bytes: int, token_model: str) -> None:
    n = r["_line"]
    stored, encoding, sha, chars = _checked_content(n, r, max_bytes)
    times = {name: _parse_time(n, name, r.get(name)) for name in _TIMES}
    status = r.get("status", "held")
    if status not in ("held", "contested", "retracted"):
        raise ValueError(f"line {n}: status {status!r} is not held, contested or retracted")
    tokens = r.get("token_count")
    if not isinstance(tokens, int) or tokens < 0:
        tokens = count_tokens(r["content"], token_model)
    versions = r.get("versions") or []
    version = _checked_version(n, r.get("version", len(versions) + 1), versions)
    for name in _PAST_TIMES:
        when = times[name]
        if when is not None and when > datetime.now(UTC) + _CLOCK_SKEW:
            raise ValueError(f"line {n}: {name} {r[name]!r} is in the future")
    current = r.get("current", status != "retracted" and times["valid_until"] is None)
    try:
        memory_id = await conn.fetchval(
            _IMPORT_SQL, owner, r["key"], check_memory_type(r.get("memory_type", "note")),
            check_description(r.get("description", "")), stored, encoding, check_metadata(r.get("metadata")),
            tokens, chars, sha, check_identifier(r.get("agent_id"), "agent_id", optional=True),
            check_identifier(r.get("thread_id"), "thread_id", optional=True),
            times["created_at"] or datetime.now(UTC), times["updated_at"], version, status, r.get("status_reason"),
            r.get("subject"), times["valid_from"] or times["created_at"] or datetime.now(UTC), times["valid_until"],
            times["expires_at"], bool(current),
        )  # fmt: skip
    except asyncpg.DataError as exc:
        raise ValueError(f"line {n}: {exc}") from None
    for v in versions:
        v_stored, v_encoding, v_sha, v_chars = _checked_content(n, v, max_bytes)
        await conn.execute(
            _IMPORT_VERSION_SQL, memory_id, int(v["version"]), check_memory_type(v.get("memory_type", "note")),
            check_description(v.get("description", "")), v_stored, v_encoding, check_metadata(v.get("metadata")),
            int(v.get("token_count") or 0), v_chars, v_sha,
            _parse_time(n, "written_at", v.get("written_at")) or datetime.now(UTC), v.get("actor"),
            v.get("surface") or "import", owner,
        )  # fmt: skip
