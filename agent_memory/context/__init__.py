"""The context wing of agent-memory: MemoryContext and the one offloader (also used by the executor)."""

from ._budget import message_tokens
from ._compaction import describe, excerpt, salient_identifiers
from ._config import MemoryContextConfig, MemoryContextSettings
from ._context import MemoryContext, placeholders_in
from ._offload import DB_UNAVAILABLE_ERRORS, Offloader, Refused
from ._state import OffloadedPart

__all__ = [
    "DB_UNAVAILABLE_ERRORS",
    "MemoryContext",
    "MemoryContextConfig",
    "MemoryContextSettings",
    "OffloadedPart",
    "Offloader",
    "Refused",
    "describe",
    "excerpt",
    "message_tokens",
    "placeholders_in",
    "salient_identifiers",
]
