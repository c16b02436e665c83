"""The MCP server: the memory tools (and the skill operator tools) over stdio or streamable HTTP, one user per
process (stdio) or per bearer token (HTTP).
"""

from ._server import SessionEndFilter, create_server, serve_http
from ._skills import SKILL_TOOL_NAMES, register_skill_tools

__all__ = [
    "SKILL_TOOL_NAMES",
    "SessionEndFilter",
    "create_server",
    "register_skill_tools",
    "serve_http",
]
