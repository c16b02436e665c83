"""Memory tools: :class:`MemoryToolbox` (retrieve, search, store, list, update, history, retract, delete, stats for
one user) and the AutoGen ``FunctionTool`` objects built on it (:func:`memory_tools`). The MCP server serves the
same toolbox.
"""

from ._autogen import MEMORY_TOOL_NAMES, memory_tools
from ._editing import HistoryResult, RetractResult, UpdateResult
from ._errors import MemoryToolError
from ._toolbox import (
    MAX_LIST_LIMIT,
    MAX_SEARCH_LIMIT,
    DeleteResult,
    ListResult,
    MemoryToolbox,
    RetrieveResult,
    SearchResult,
    StatsResult,
    StoreResult,
    parse_since,
)

__all__ = [
    "MAX_LIST_LIMIT",
    "MAX_SEARCH_LIMIT",
    "MEMORY_TOOL_NAMES",
    "DeleteResult",
    "HistoryResult",
    "ListResult",
    "MemoryToolError",
    "MemoryToolbox",
    "RetractResult",
    "RetrieveResult",
    "SearchResult",
    "StatsResult",
    "StoreResult",
    "UpdateResult",
    "memory_tools",
    "parse_since",
]
