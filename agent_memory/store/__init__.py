"""The store wing of agent-memory."""

from ._contexts import ContextStates, SavedContext
from ._db import Database, redact_url, release_embedded_servers, schema_sql, start_embedded_server
from ._skills import SkillStore, SkillWrite
from ._store import MemoryStore, decode_content
from ._transforms import apply_transforms, compile_pattern, parse_line_range, split_lines

__all__ = [
    "ContextStates",
    "Database",
    "MemoryStore",
    "SavedContext",
    "SkillStore",
    "SkillWrite",
    "apply_transforms",
    "compile_pattern",
    "decode_content",
    "parse_line_range",
    "redact_url",
    "release_embedded_servers",
    "schema_sql",
    "split_lines",
    "start_embedded_server",
]
