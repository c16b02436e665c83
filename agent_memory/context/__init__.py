"""The context wing of agent-memory."""

from ._budget import message_tokens
from ._compaction import describe, excerpt
from ._context import MemoryContext, MemoryContextConfig, placeholders_in

__all__ = [
    "MemoryContext",
    "MemoryContextConfig",
    "describe",
    "excerpt",
    "message_tokens",
    "placeholders_in",
]
