"""Checks on caller input: refuse loudly what cannot be stored exactly, never alter it."""

from __future__ import annotations

import json
import math
from typing import Any

MAX_ID_CHARS = 255
MAX_TYPE_CHARS = 50
MAX_DESCRIPTION_CHARS = 4000
MAX_QUERY_CHARS = 4000


def _first_bad_char(value: str) -> str | None:
    if "\x00" in value:
        return "a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a character that cannot be encoded as UTF-8 (lone surrogate at index {exc.start})"
    return None


def check_identifier(value: object, name: str, *, optional: bool = False) -> str | None:
    """A user/agent/thread identifier: non-empty text of at most 255 characters, no NUL."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise ValueError(f"{name} is {len(value)} characters long; the limit is {MAX_ID_CHARS}")
    bad = _first_bad_char(value)
    if bad:
        raise ValueError(f"{name} contains {bad}")
    return value


def check_query(value: object) -> str:
    """A search query: text that PostgreSQL can take (no NUL, no lone surrogate), stripped, cut to 4000 chars."""
    if not isinstance(value, str):
        raise ValueError(f"query must be a string, got {type(value).__name__}")
    bad = _first_bad_char(value)
    if bad:
        raise ValueError(f"query contains {bad}")
    return value.strip()[:MAX_QUERY_CHARS]


def check_user_id(value: object) -> str:
    checked = check_identifier(value, "user_id")
    assert checked is not None
    return checked


def check_memory_type(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("memory_type must be a non-empty string (e.g. 'note', 'command_output')")
    if len(value) > MAX_TYPE_CHARS:
        raise ValueError(f"memory_type is {len(value)} characters long; the limit is {MAX_TYPE_CHARS}")
    bad = _first_bad_char(value)
    if bad:
        raise ValueError(f"memory_type contains {bad}")
    return value


def check_description(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"description must be a string, got {type(value).__name__}")
    if len(value) > MAX_DESCRIPTION_CHARS:
        raise ValueError(f"description is {len(value)} characters long; the limit is {MAX_DESCRIPTION_CHARS}")
    bad = _first_bad_char(value)
    if bad:
        raise ValueError(f"description contains {bad}")
    return value


def check_content(value: object, max_bytes: int) -> bytes:
    """The UTF-8 bytes of ``value``; ValueError when it is not a str, cannot be encoded, or is too big."""
    if not isinstance(value, str):
        raise ValueError(f"content must be a str, got {type(value).__name__} (decode bytes first)")
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"content contains a character that cannot be encoded as UTF-8 (lone surrogate {value[exc.start]!r} "
            f"at index {exc.start}); refusing to store an altered copy. Decode the source with errors='replace' "
            "or 'surrogateescape'-free handling first."
        ) from exc
    if len(data) > max_bytes:
        raise ValueError(f"content is {len(data)} bytes; the limit is {max_bytes} (AGENT_MEMORY_MAX_CONTENT_BYTES)")
    return data


def check_metadata(value: object) -> dict[str, Any]:
    """A JSON object that PostgreSQL JSONB can hold exactly (JSONB refuses \\u0000 in strings)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"metadata must be a JSON object (dict), got {type(value).__name__}")
    strings, numbers = _leaves(value)  # before json.dumps, which recurses and would overflow Python's stack
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata is not JSON-serialisable: {exc}") from exc
    for text in strings:
        bad = _first_bad_char(text)
        if bad:
            raise ValueError(f"metadata contains {bad}; PostgreSQL JSONB cannot store it exactly")
    for number in numbers:
        negative_zero = number == 0 and math.copysign(1.0, number) < 0
        if negative_zero or (number.is_integer() and "e" in repr(number)):
            raise ValueError(
                f"metadata number {number!r} would come back altered (JSONB keeps a number's value, not its float "
                f"type: {number!r} returns as {int(number)!r}); store it as a string"
            )
    return value


MAX_METADATA_DEPTH = 64


def _leaves(value: object) -> tuple[list[str], list[float]]:
    """The strings (keys too) and floats of a metadata value, walked without recursion, at most 64 levels deep."""
    strings: list[str] = []
    numbers: list[float] = []
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_METADATA_DEPTH:
            raise ValueError(f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep")
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, float):
            numbers.append(item)
        elif isinstance(item, dict):
            for k, v in item.items():
                stack += [(k, depth), (v, depth + 1)]
        elif isinstance(item, list | tuple):
            stack += [(v, depth + 1) for v in item]
    return strings, numbers


def check_limit(value: object, name: str = "limit", maximum: int = 1000) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > maximum:
        raise ValueError(f"{name} must be an integer between 1 and {maximum}")
    return value
