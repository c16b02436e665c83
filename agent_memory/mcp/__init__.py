"""The mcp wing of agent-memory."""

from ._server import SessionEndFilter, create_server, serve_http
from ._skills import SKILL_TOOL_NAMES

__all__ = [
    "SKILL_TOOL_NAMES",
    "SessionEndFilter",
    "create_server",
    "serve_http",
]
