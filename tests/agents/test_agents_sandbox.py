"""As root, executed code runs as an unprivileged user that cannot reach the database or its password."""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock

from agent_memory.agents import SANDBOX_USER, LocalProcessGroupExecutor, SandboxUnavailable, resolve_sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox user is only used when running as root")


@pytest.fixture
def sandbox_work_dir() -> Path:
    # Under /tmp (world-traversable), not pytest's 0700 tmp dir, like AGENT_MEMORY_HOME/work would be.
    path = Path(tempfile.gettempdir()) / f"am-sandbox-{uuid.uuid4().hex[:8]}"
    try:
        resolve_sandbox("sandbox", path)
    except SandboxUnavailable as exc:
        pytest.skip(f"sandbox user unusable on this machine: {exc}")
    return path


def _socket_path(host: str) -> str:
    sockets = [p for p in Path(host).glob(".s.PGSQL.*") if p.is_socket()]
    return str(sockets[0]) if sockets else f"{host}/.s.PGSQL.5432"


async def run(executor: LocalProcessGroupExecutor, code: str, language: str = "bash") -> tuple[int, str]:
    result = await executor.execute_code_blocks([CodeBlock(code, language)], CancellationToken())
    return result.exit_code, result.output


async def test_code_runs_as_the_sandbox_user(sandbox_work_dir: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=sandbox_work_dir, run_as="sandbox")
    assert await run(executor, "id -un") == (0, f"{SANDBOX_USER}\n")


async def test_python_code_can_write_its_work_dir(sandbox_work_dir: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=sandbox_work_dir, run_as="sandbox")
    code, out = await run(executor, "open('result.txt', 'w').write('ok'); print(open('result.txt').read())", "python")
    assert (code, out) == (0, "ok\n")


async def test_sandboxed_code_cannot_reach_the_database_socket(sandbox_work_dir: Path, database_url: str) -> None:
    host = parse_qs(urlsplit(database_url).query).get("host", [""])[0]
    if not host.startswith("/"):
        pytest.skip("the test database is not on a unix socket")
    target = _socket_path(host)
    # The test process (root) can connect, the sandboxed code cannot.
    probe = socket.socket(socket.AF_UNIX)
    probe.connect(target)
    probe.close()
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=sandbox_work_dir, run_as="sandbox")
    code, out = await run(
        executor,
        f"import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({target!r})\n    print('connected')\n"
        "except OSError as e:\n    print(type(e).__name__)",
        "python",
    )
    assert code == 0 and out.strip() in {"PermissionError", "FileNotFoundError"}


async def test_sandboxed_code_cannot_read_the_database_password(sandbox_work_dir: Path) -> None:
    home = Path(os.environ["AGENT_MEMORY_HOME"])
    password_file = home / "db-password"
    if not password_file.exists():
        pytest.skip("the test database is not the embedded server")
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=sandbox_work_dir, run_as="sandbox")
    code, out = await run(executor, f"cat {password_file}")
    assert code != 0 and "Permission denied" in out


async def test_current_mode_keeps_this_process_user(tmp_path: Path) -> None:
    executor = LocalProcessGroupExecutor(timeout=30, work_dir=tmp_path, run_as="current")
    assert await run(executor, "id -u") == (0, "0\n")
