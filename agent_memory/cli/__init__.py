"""The ``agent-memory`` command. Only :func:`main` is imported here: each command's module (MCP, UI, chat,
skills, reindex) is imported when that command runs, so ``agent-memory retrieve`` does not pay for MCP,
Chainlit or the agents.
"""

from ._main import main

__all__ = ["main"]
