"""Limits on a whole sandboxed run, not only on each of its processes: one memory and pids cgroup per run.

Resource limits (``prlimit``) bound each process: its data memory, its file sizes. A run's processes together
could still take the host's memory (eight processes of 48 MB under a 64 MB limit each), and shared memory is not
data memory at all (``mmap(MAP_SHARED | MAP_ANONYMOUS)``, a tmpfs): one process held 512 MB under a 64 MB limit.
The kernel's OOM killer would then pick the biggest process on the host: PostgreSQL, or the UI.

As root, each run therefore gets its own cgroup in the memory and pids controllers (cgroup v2:
``agent-memory/user-<uid>/run-<id>``; v1: ``agent-memory/run-<id>`` in each hierarchy), limited to
``SandboxPolicy.run_memory_mb`` (shared memory and page cache included; no swap) and ``max_processes`` tasks,
and joins its user's CPU group (v2: ``user-<uid>``; v1: ``cpu/agent-memory/user-<uid>``), so that users share
the CPU equally whatever number of processes each runs. The run joins them before bubblewrap starts, so
everything in the sandbox is inside; the run's cgroup is removed when the run has ended (its user's stays).
When the memory runs out, the kernel kills a process of that run only, and the run's output says so.

Example:
    >>> cgroup = RunCgroup(dirs=[], procs=[Path("/sys/fs/cgroup/agent-memory/run-1/cgroup.procs")])
    >>> cgroup.join_command(["true"])[3:]
    ['sh', '/sys/fs/cgroup/agent-memory/run-1/cgroup.procs', '--', 'true']
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import get_settings

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP = "agent-memory"
CGROUP_HINT = (
    "as root, code runs only with a memory limit for the whole run: make the cgroup file system writable for "
    "this process (cgroup v2 with the cpu, memory and pids controllers, or the v1 cpu, memory and pids "
    "hierarchies), or set the executor's run_limits to `process` to accept per-process limits only"
)
SWEEP_AFTER_SECONDS = 600
RELEASE_WAIT_SECONDS = 5.0
# Joins the cgroups named before "--", then becomes the command after it. Runs as root, before bubblewrap.
_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'


class CgroupUnavailable(RuntimeError):
    """The run's cgroup cannot be made here; the message says what to change."""


@dataclass
class RunCgroup:
    """The cgroup directories of one run (one for v2, one per hierarchy for v1) and how to join them."""

    dirs: list[Path]
    procs: list[Path]
    memory_mb: int = 0

    def join_command(self, argv: list[str]) -> list[str]:
        """``argv`` started inside this cgroup."""
        return ["/bin/sh", "-c", _JOIN, "sh", *(str(p) for p in self.procs), "--", *argv]

    def _oom_note(self) -> str:
        """Why the kernel killed a process of this run: its own limit, or the one all runs share."""
        peak = _peak(self.dirs)  # 0: the kernel does not say (v2 before Linux 5.19): take it as this run's own
        if peak == 0 or peak >= self.memory_mb * 2**20 * 0.95:
            return f"Killed: the run used all of its memory ({self.memory_mb} MB for the whole run, run_memory_mb)"
        return (  # killed below its own limit: the limit all runs share was reached
            "Killed: the runs of all users together used the memory they may hold (AGENT_MEMORY_RUNS_MEMORY_MB, "
            f"{runs_memory_mb()} MB); try again when fewer run at once"
        )

    def release(self) -> str | None:
        """Remove the cgroup (the run has ended); a note for the run's output when its memory ran out."""
        note = self._oom_note() if _oom_kills(self.dirs) else None
        # The run's last processes may still be exiting (a killed PID namespace ends asynchronously): a cgroup
        # with tasks cannot be removed yet, so try for a moment; one still busy is left to a later sweep.
        deadline = time.monotonic() + RELEASE_WAIT_SECONDS
        for directory in self.dirs:
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)
        return note


def run_cgroup(memory_mb: int, max_processes: int, root: Path | None = None, uid: int | None = None) -> RunCgroup:
    """A fresh cgroup for one run, limited to ``memory_mb`` and ``max_processes``, in the CPU group of the user
    whose code runs as ``uid``; :class:`CgroupUnavailable` when neither cgroup v2 nor the v1 memory, pids and cpu
    hierarchies can be written under ``root``.

    All runs share the parent ``agent-memory``, limited to ``AGENT_MEMORY_RUNS_MEMORY_MB`` (default: half of the
    machine's memory): many users' runs at once run out of memory among themselves, never PostgreSQL's. CPU is
    shared per user (``agent-memory/user-<uid>``, equal weights): a user's 200 busy processes get the share of one
    user, not 200 of every other user's, and all runs together weigh as one process of the server.
    """
    root = root or CGROUP_ROOT
    name = f"run-{int(time.time())}-{secrets.token_hex(6)}"  # its birth time: see _sweep
    user = None if uid is None else user_cgroup_name(uid)
    made: list[Path] = []
    joined: list[Path] = []  # cgroups the run joins and leaves in place (its user's CPU group)
    total = runs_memory_mb() * 2**20
    try:
        if (root / "cgroup.controllers").exists():
            parent = _v2_parent(root)
            _write_limits(parent, {"memory.max": total}, optional={"memory.max"})  # see _v1 below
            home = parent if user is None else _v2_user(parent, user)
            run = home / name
            run.mkdir()
            made.append(run)
            limits = {"memory.max": memory_mb * 2**20, "memory.swap.max": 0, "pids.max": max_processes}
            _write_limits(run, limits, optional={"memory.swap.max"})
        else:
            # Best effort: lowering it below what running runs hold fails (EBUSY), and must not refuse this run.
            memory_parent = _v1_parent(root, "memory")
            shared = {"memory.limit_in_bytes": total}
            _write_limits(memory_parent, shared, optional=set(shared))
            memory, pids = memory_parent / name, _v1_parent(root, "pids") / name
            cpu = _v1_parent(root, "cpu")
            if user is not None:
                cpu = cpu / user
                cpu.mkdir(exist_ok=True)
            joined.append(cpu)
            for run in (memory, pids):
                run.mkdir()
                made.append(run)
            limit = memory_mb * 2**20
            limits = {"memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": limit}
            _write_limits(memory, limits, optional={"memory.memsw.limit_in_bytes"})
            _write_limits(pids, {"pids.max": max_processes})
    except OSError as exc:
        for run in reversed(made):
            with contextlib.suppress(OSError):
                run.rmdir()
        raise CgroupUnavailable(
            f"the run's cgroup could not be made ({exc}), so code was not run: {CGROUP_HINT}"
        ) from exc
    procs = [group / "cgroup.procs" for group in (*made, *joined)]
    return RunCgroup(made, procs, memory_mb)


def user_cgroup_name(uid: int) -> str:
    """The name of the cgroup whose CPU weight is the share of the user whose code runs as ``uid``."""
    return f"user-{uid}"


def remove_user_cgroups(uid: int, root: Path | None = None) -> None:
    """Remove the CPU cgroup of a forgotten user's uid (best effort: one still in use stays)."""
    root = root or CGROUP_ROOT
    for parent in (root / GROUP, root / "cpu" / GROUP):
        with contextlib.suppress(OSError):
            (parent / user_cgroup_name(uid)).rmdir()


def runs_memory_mb() -> int:
    """``AGENT_MEMORY_RUNS_MEMORY_MB``, else half of the machine's memory (``/proc/meminfo``)."""
    configured = get_settings().runs_memory_mb
    if configured is not None:
        return configured
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return max(64, int(line.split()[1]) // 1024 // 2)
    return 4096


def _v2_parent(root: Path) -> Path:
    parent = root / GROUP
    if not parent.is_dir():
        parent.mkdir()
    _enable(root, {"cpu", "memory", "pids"})
    _enable(parent, {"cpu", "memory", "pids"})
    _sweep(parent)  # runs of earlier versions, made directly under the parent
    return parent


def _v2_user(parent: Path, user: str) -> Path:
    """The user's cgroup: its CPU weight is the user's share; its runs are its children (v2 has one tree)."""
    home = parent / user
    home.mkdir(exist_ok=True)
    _enable(home, {"memory", "pids"})
    _sweep(home)
    return home


def _enable(group: Path, controllers: set[str]) -> None:
    """Make ``controllers`` available to the children of ``group`` (v2 ``cgroup.subtree_control``)."""
    control = group / "cgroup.subtree_control"
    missing = controllers - set(control.read_text().split()) if control.exists() else controllers
    if missing:
        control.write_text(" ".join(f"+{name}" for name in sorted(missing)))


def _v1_parent(root: Path, controller: str) -> Path:
    if not (root / controller / "cgroup.procs").exists():
        raise OSError(f"no cgroup v1 {controller} hierarchy at {root / controller}")
    parent = root / controller / GROUP
    if not parent.is_dir():
        parent.mkdir()
        if controller == "memory":  # the runs count toward the parent's limit (settable while it has no children)
            _write_limits(parent, {"memory.use_hierarchy": 1}, optional={"memory.use_hierarchy"})
    _sweep(parent)
    return parent


def _sweep(parent: Path) -> None:
    """Remove cgroups left by runs that ended without removing theirs (a cancelled run).

    Only old ones: a cgroup is empty from its creation until its run joins it, and another run (of this process or
    another) must not remove it meanwhile. rmdir fails, harmlessly, on a cgroup still in use.
    """
    for entry in os.scandir(parent):
        born = entry.name.split("-")
        if entry.name.startswith("run-") and born[1].isdigit() and int(born[1]) < time.time() - SWEEP_AFTER_SECONDS:
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)


def _write_limits(directory: Path, limits: dict[str, int], optional: frozenset[str] | set[str] = frozenset()) -> None:
    for name, value in limits.items():
        try:
            (directory / name).write_text(str(value))
        except OSError:
            if name not in optional:  # e.g. no swap accounting: nothing to limit there
                raise


def _oom_kills(directories: list[Path]) -> int:
    """The kernel's count of processes killed for memory in these cgroups (the first that keeps one)."""
    for directory in directories:
        for name in ("memory.events", "memory.oom_control"):
            with contextlib.suppress(OSError, ValueError):
                for line in (directory / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
    return 0


def _peak(directories: list[Path]) -> int:
    """The most memory these cgroups held at once (v1 ``memory.max_usage_in_bytes``, v2 ``memory.peak``)."""
    for directory in directories:
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            with contextlib.suppress(OSError, ValueError):
                return int((directory / name).read_text().split()[0])
    return 0
