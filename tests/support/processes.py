"""Finding a test's processes in `ps`: a unique `sleep` duration marks them."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Callable


def processes_with(marker: str) -> list[str]:
    """Command lines of live processes that mention ``marker`` (zombies excluded; -ww: never cut at 80 columns)."""
    out = subprocess.run(["ps", "-ww", "-eo", "stat=,args="], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if marker in line and not line.lstrip().startswith("Z")]


def marker_seconds() -> str:
    """A unique sleep duration (in seconds, long enough to outlive any test) that identifies a test's processes."""
    return f"{700 + uuid.uuid4().int % 9000}.{uuid.uuid4().int % 1000:03d}"


async def wait_until(condition: Callable[[], bool], limit_s: float = 20.0) -> None:
    """Poll a condition (a process appearing is not an event we can await)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.05)
