"""The core commands start light: importing the command does not import MCP, Chainlit or the agents.

Each heavier command's module is imported only when that command runs (``COMMAND_PROVIDERS``); a wing face
that imported them eagerly once doubled the start-up of every ``agent-memory retrieve``.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("mcp", "chainlit", "autogen_agentchat", "agent_memory.agents", "agent_memory.mcp", "agent_memory.skills")


def test_importing_the_command_does_not_import_mcp_chainlit_or_the_agents() -> None:
    probe = f"import json, sys; import agent_memory.cli; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(result.stdout) == []
