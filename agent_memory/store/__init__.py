"""The store wing of agent-memory."""

from ._accounts import LoginStore
from ._contexts import ContextStates, SavedContext
from ._db import Database, redact_url, release_embedded_servers, schema_sql, start_embedded_server
from ._rows import decode_content
from ._scoping import find_user_pk
from ._skills import SkillStore, SkillWrite
from ._store import MemoryStore
from ._team_specs import TeamSpecStore
from ._threads import ThreadStore
from ._tokens import TokenStore
from ._transforms import apply_transforms, compile_pattern, grep_off_loop, parse_line_range, split_lines

__all__ = [
    "ContextStates",
    "Database",
    "LoginStore",
    "MemoryStore",
    "SavedContext",
    "SkillStore",
    "SkillWrite",
    "TeamSpecStore",
    "ThreadStore",
    "TokenStore",
    "apply_transforms",
    "compile_pattern",
    "decode_content",
    "find_user_pk",
    "grep_off_loop",
    "parse_line_range",
    "redact_url",
    "release_embedded_servers",
    "schema_sql",
    "split_lines",
    "start_embedded_server",
]
