"""The cli wing of agent-memory."""

from ._main import main
from ._mcp import parse_host_port
from ._ui import chainlit_env, header_auth_enabled

__all__ = [
    "chainlit_env",
    "header_auth_enabled",
    "main",
    "parse_host_port",
]
