"""agent-memory: a two-layer PostgreSQL memory for AutoGen code-executing agents.

Layer 1 is what the model sees: large content replaced by ``[MemoryRef: <key> - <description> - <N> tokens]``.
Layer 2 is :class:`MemoryStore`: the exact content in ``agent_memories``, per user, fetched on demand.
"""

from typing import TYPE_CHECKING, Any

from .errors import AgentMemoryError, DatabaseUnavailable, MemoryNotFound
from .models import MemoryItem, MemoryStats
from .placeholders import format_memory_ref, parse_memory_refs
from .store import MemoryStore

if TYPE_CHECKING:
    from .context import MemoryContext, MemoryContextConfig
    from .skills import ProceduralMemory, ProceduralMemorySettings

# These pull in AutoGen; imported on first use so `import agent_memory` (and every CLI command) stays light.
_LAZY = {
    "MemoryContext": "context",
    "MemoryContextConfig": "context",
    "ProceduralMemory": "skills",
    "ProceduralMemorySettings": "skills",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentMemoryError",
    "DatabaseUnavailable",
    "MemoryContext",
    "MemoryContextConfig",
    "MemoryItem",
    "MemoryNotFound",
    "MemoryStats",
    "MemoryStore",
    "ProceduralMemory",
    "ProceduralMemorySettings",
    "format_memory_ref",
    "parse_memory_refs",
]
__version__ = "0.1.0"
