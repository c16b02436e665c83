"""The fixed placeholder format ``[MemoryRef: <key> - <description> - <N> tokens]``.

Example:
    >>> from agent_memory.placeholders import format_memory_ref, parse_memory_refs
    >>> ref = format_memory_ref("cmd_1a2b3c4d5e6f", "npm install output", 2340)
    >>> ref
    '[MemoryRef: cmd_1a2b3c4d5e6f - npm install output - 2340 tokens]'
    >>> parse_memory_refs("see " + ref)[0].key
    'cmd_1a2b3c4d5e6f'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEY_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}"
KEY_RE = re.compile(rf"^{KEY_PATTERN}$")
MEMORY_REF_RE = re.compile(
    rf"\[MemoryRef: (?P<key>{KEY_PATTERN}) - (?P<description>[^\]\n]*?) - (?P<tokens>\d+) tokens\]"
)
MAX_DESCRIPTION_CHARS = 160


@dataclass(frozen=True)
class MemoryRef:
    """One parsed placeholder."""

    key: str
    description: str
    tokens: int
    start: int
    end: int


def is_valid_key(key: object) -> bool:
    """True when ``key`` has the shape of a memory key (letters, digits, ``_ . : -``; at most 255 chars)."""
    return isinstance(key, str) and KEY_RE.match(key) is not None


def clean_description(description: str, max_chars: int = MAX_DESCRIPTION_CHARS) -> str:
    """One line, no brackets, no `` - `` separators, at most ``max_chars``: safe inside a placeholder."""
    text = " ".join(description.split())
    text = text.replace("[", "(").replace("]", ")").replace(" - ", " – ")
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text or "stored content"


def format_memory_ref(key: str, description: str, tokens: int) -> str:
    """Render a placeholder. The description is cleaned so the result always parses back."""
    if not is_valid_key(key):
        raise ValueError(f"invalid memory key {key[:80]!r}")
    return f"[MemoryRef: {key} - {clean_description(description)} - {int(tokens)} tokens]"


def parse_memory_refs(text: str) -> list[MemoryRef]:
    """All placeholders in ``text``, in order."""
    return [
        MemoryRef(m["key"], m["description"], int(m["tokens"]), m.start(), m.end())
        for m in MEMORY_REF_RE.finditer(text)
    ]
