"""Run one of our servers (``agent-memory ui``, ``agent-memory mcp --http``) as a real subprocess for tests."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(
    argv: list[str],
    env: dict[str, str],
    log_path: Path,
    ready: Callable[[], bool],
    *,
    name: str,
    timeout_s: float = 60,
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` (output to ``log_path``), wait until ``ready()`` is true, stop it afterwards.

    ``ready`` is polled: another process becoming ready is not an event we can await. Transport errors while
    it starts count as "not yet". Fails with the log's location if the process exits or never gets ready.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {log_path}")
            try:
                if ready():
                    break
            except (OSError, httpx.TransportError):  # not listening yet (urllib's URLError is an OSError)
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not become ready within {timeout_s:.0f} s; see {log_path}")
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
