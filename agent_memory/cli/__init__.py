"""The cli wing of agent-memory."""

from ._main import main
from ._mcp import parse_host_port
from ._ui import chainlit_env

__all__ = [
    "chainlit_env",
    "main",
    "parse_host_port",
]
