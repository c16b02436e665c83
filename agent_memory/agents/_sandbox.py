"""Run model-written code as an unprivileged OS user when this process is root.

Code the executor runs must not be able to read other users' memory. Scrubbing secrets from its
environment is not enough when it runs as root: root can read ``AGENT_MEMORY_HOME/db-password`` and
reach the database socket. As root, the executor therefore drops to the ``agent_memory_sandbox`` system
user (created on first use), which can use the interpreter and its own work directory but cannot read
the database's files, password or socket. As a normal user there is no other user to drop to: use the
Docker executor (``executor.kind = "docker"``) for isolation between chat users on a shared machine.

Example:
    >>> from agent_memory.agents import resolve_sandbox
    >>> resolve_sandbox("current") is None
    True
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

SANDBOX_USER = "agent_memory_sandbox"
RunAs = Literal["auto", "sandbox", "current"]


@dataclass(frozen=True)
class SandboxIdentity:
    """The OS identity code runs as."""

    user: str
    uid: int
    gid: int
    home: Path | None = None


class SandboxUnavailable(RuntimeError):
    """``run_as="sandbox"`` was asked for but cannot be provided here."""


def _ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(name)


def _can_run_interpreter(identity: SandboxIdentity, work_dir: Path | None) -> str | None:
    """None when the sandbox user can start this Python and read a script in ``work_dir`` by its
    absolute path (as the executor runs them); else why not."""
    argv = [sys.executable, "-c", "pass"]
    probe: Path | None = None
    if work_dir is not None:
        probe = work_dir / ".sandbox-probe.py"
        probe.write_text("pass\n")
        argv = [sys.executable, str(probe.resolve())]
    try:
        result = subprocess.run(
            argv,
            cwd=work_dir or "/",
            user=identity.uid,
            group=identity.gid,
            extra_groups=[],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    finally:
        if probe is not None:
            probe.unlink(missing_ok=True)
    return None if result.returncode == 0 else result.stderr.decode(errors="replace").strip()[-300:]


def resolve_sandbox(run_as: RunAs, work_dir: Path | None = None) -> SandboxIdentity | None:
    """The identity to run code as (None: this process's own).

    ``auto``: the sandbox user when root and usable, else the current user (with a warning when root).
    ``sandbox``: the sandbox user or :class:`SandboxUnavailable`. ``current``: never switch.
    """
    if run_as == "current" or os.geteuid() != 0:
        if run_as == "sandbox":
            raise SandboxUnavailable("run_as='sandbox' needs root; use the Docker executor to isolate code instead")
        return None
    try:
        entry = _ensure_user(SANDBOX_USER)
    except (OSError, subprocess.CalledProcessError) as exc:
        reason = f"cannot create the OS user {SANDBOX_USER!r}: {exc}"
    else:
        identity = SandboxIdentity(SANDBOX_USER, entry.pw_uid, entry.pw_gid)
        if work_dir is not None:
            prepare_work_dir(identity, work_dir)
        problem = _can_run_interpreter(identity, work_dir)
        if problem is None:
            return identity
        reason = f"{SANDBOX_USER} cannot run {sys.executable} in {work_dir or '/'}: {problem}"
    if run_as == "sandbox":
        raise SandboxUnavailable(reason)
    log.warning(
        "running code as root, NOT sandboxed (%s). Make the interpreter readable by others or use Docker.", reason
    )
    return None


def prepare_work_dir(identity: SandboxIdentity, work_dir: Path) -> None:
    """Give the sandbox user its work directory (and let it traverse the parents it needs)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    os.chown(work_dir, identity.uid, identity.gid)
    work_dir.chmod(0o700)
