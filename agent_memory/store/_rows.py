"""Rows of ``agent_memories`` as Python values: content encoding (NUL-safe), keys, :class:`MemoryItem`."""

from __future__ import annotations

import re
import secrets
from typing import Any

import asyncpg

from ..models import MemoryItem

_KEY_PREFIXES = {
    "command_output": "cmd",
    "tool_result": "tool",
    "user_paste": "paste",
    "user_preference": "pref",
    "user_fact": "fact",
    "note": "note",
    "lesson": "lesson",
    "skill": "skill",
}


def encode_content(content: str) -> tuple[str, str]:
    """(stored text, encoding). PostgreSQL TEXT refuses NUL, so such content is escaped reversibly."""
    if "\x00" not in content:
        return content, "text"
    return content.replace("\\", "\\\\").replace("\x00", "\\0"), "nul-escaped"


_UNESCAPE_RE = re.compile(r"\\(\\|0)")


def decode_content(stored: str, encoding: str) -> str:
    if encoding == "text":
        return stored
    if encoding == "nul-escaped":
        return _UNESCAPE_RE.sub(lambda m: "\\" if m[1] == "\\" else "\x00", stored)
    raise ValueError(f"unknown content encoding {encoding!r}")


def new_key(memory_type: str) -> str:
    prefix = _KEY_PREFIXES.get(memory_type) or (re.sub(r"[^a-z0-9]", "", memory_type.lower())[:8] or "mem")
    return f"{prefix}_{secrets.token_hex(6)}"


def item_from_row(row: asyncpg.Record | dict[str, Any]) -> MemoryItem:
    return MemoryItem(
        memory_key=row["memory_key"],
        description=row["description"],
        memory_type=row["memory_type"],
        score=row.get("score") if isinstance(row, dict) else None,
        why=row.get("why") if isinstance(row, dict) else None,
        matched_lines=row.get("lines") if isinstance(row, dict) else None,
        token_count=row["token_count"],
        char_count=row["char_count"],
        created_at=row["created_at"],
        metadata=row["content_metadata"] or {},
        agent_id=row["agent_id"],
        thread_id=row["thread_id"],
        access_count=row["access_count"],
        last_accessed_at=row["last_accessed_at"],
        content_sha256=row["content_sha256"],
        version=row["version"],
        status=row["status"],
        status_reason=row["status_reason"],
        subject=row["subject"],
        valid_from=row["valid_from"],
        valid_until=row["valid_until"],
        expires_at=row["expires_at"],
        updated_at=row["updated_at"],
    )
