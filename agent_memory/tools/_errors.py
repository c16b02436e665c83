"""Errors of the memory tools: what was wrong and what to do instead."""

from __future__ import annotations


class MemoryToolError(ValueError):
    """Bad input to a memory tool; the message says what was wrong and what to do instead."""


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise MemoryToolError(f"key must be a string such as 'cmd_1a2b3c4d5e6f', got {type(key).__name__}")
    return key.strip()


def _not_found(key: str) -> MemoryToolError:
    shown = key if len(key) <= 80 else key[:77] + "..."
    return MemoryToolError(
        f"no memory with key {shown!r}. Keys look like cmd_1a2b3c4d5e6f and appear in [MemoryRef: <key> - ...] "
        "placeholders; use search_memory or list_memories to find one."
    )
