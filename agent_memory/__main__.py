"""``python -m agent_memory`` is the ``agent-memory`` command."""

import sys

from agent_memory.cli import main

sys.exit(main())
