"""agent-memory: a two-layer PostgreSQL memory for AutoGen code-executing agents.

Layer 1 is what the model sees: large content replaced by ``[MemoryRef: <key> - <description> - <N> tokens]``.
Layer 2 is :class:`MemoryStore`: the exact content in ``agent_memories``, per user, fetched on demand.
"""

from .context import MemoryContext, MemoryContextConfig
from .errors import AgentMemoryError, DatabaseUnavailable, MemoryNotFound
from .models import MemoryItem, MemoryStats
from .placeholders import format_memory_ref, parse_memory_refs
from .skills import ProceduralMemory, ProceduralMemorySettings
from .store import MemoryStore

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
