"""``python -m agent_memory`` is the ``agent-memory`` command."""

import sys

from .cli import main

sys.exit(main())
