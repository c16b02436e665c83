"""The bubblewrap sandbox every code block runs in.

Model-written code is untrusted, and so are the chat users who ask for it. Each block runs in fresh PID, IPC,
UTS, mount and network namespaces made by `bubblewrap <https://github.com/containers/bubblewrap>`_ (the tool
Flatpak and Anthropic's sandbox runtime use): system directories and the interpreter read-only, the thread's
work directory the only writable place, a private size-limited ``/tmp``, a ``/proc`` that shows only the run's
own processes, no network (``network="host"`` opts in), an environment built from an allowlist, resource limits
(CPU time, memory, processes, file size; the user's disk use is watched by :mod:`._disk_guard`), a seccomp
filter that refuses kernel keyrings, new namespaces and mounts (:mod:`._seccomp`), and nothing that outlives
the run: when the run ends, times out or is stopped, its PID namespace dies and every process in it with it.

Identities: as root, each chat user's code runs under its own unprivileged uid (:func:`sandbox_uid`: derived
from the user, recorded in ``$AGENT_MEMORY_HOME/sandbox-uids.json``, stable across restarts), so users cannot
read or signal each other's files and processes and their process limits are their own. As a normal OS user
there is no other uid to switch to: a user namespace runs the code as this user, and only the mount namespace
keeps users apart (a user's code sees only its own work directory; see the README's Security model).

The privileged side never follows a path the user controls: the code reaches the sandbox through a memory file
(``memfd``) that bubblewrap copies in, and the work directory is opened with ``O_NOFOLLOW`` under a parent
only this process can change, then bound by its file descriptor.

If bubblewrap cannot run, nothing runs (:class:`SandboxUnavailable` says what to install). Running without
isolation takes an explicit ``SandboxPolicy(isolation="none")``, for a single trusted user only.

Example:
    >>> policy = SandboxPolicy(memory_mb=512, network="none")
    >>> policy.isolation, policy.max_processes
    ('bubblewrap', 256)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from autogen_ext.code_executors._common import lang_to_cmd
from pydantic import BaseModel, ConfigDict, Field

from ._cgroups import CgroupUnavailable, RunCgroup, run_cgroup
from ._seccomp import SeccompUnavailable, seccomp_filter_fd

# Names passed from the server's environment to code, whatever the policy says (values never secret).
BASE_ENV = ("LANG", "LC_ALL", "TERM", "TZ")
# Where the code of a block appears inside the sandbox (read-only, outside the work directory).
CODE_DIR = "/run/agent-memory"
# Per-user uids live far from system and login ranges, and from container sub-uid ranges.
UID_BASE = 1_500_000_000
UID_SPAN = 500_000_000
UID_REGISTRY = "sandbox-uids.json"
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`) and make "
    "sure user namespaces are enabled (`sysctl kernel.unprivileged_userns_clone=1` where that setting exists), "
    "or set executor isolation to `none` for a single trusted user (AGENT_MEMORY_EXECUTOR_ISOLATION=none)"
)


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be set up here, so the code was not run. The message says what to install or set."""


class SandboxPolicy(BaseModel):
    """How code runs: isolation, network and per-run limits (the team spec's ``executor`` section sets them).

    Example:
        >>> SandboxPolicy(network="host").network
        'host'
    """

    model_config = ConfigDict(extra="forbid")

    isolation: Literal["bubblewrap", "none"] = Field(
        default="bubblewrap", description="`none` runs code as this process, unisolated: single trusted user only"
    )
    network: Literal["none", "host"] = Field(default="none", description="`host` lets code use the network")
    cpu_seconds: int = Field(default=300, ge=1, description="CPU time per process (RLIMIT_CPU)")
    memory_mb: int = Field(default=2048, ge=16, description="data memory per process (RLIMIT_DATA)")
    max_processes: int = Field(default=256, ge=4, description="processes and threads of the user (RLIMIT_NPROC)")
    run_memory_mb: int = Field(
        default=2048, ge=16, description="memory of the whole run, shared memory included (as root: a cgroup)"
    )
    run_limits: Literal["cgroup", "process"] = Field(
        default="cgroup",
        description="as root, `cgroup` also bounds the whole run's memory and processes (code is refused when no "
        "cgroup can be made); `process`: per-process limits only",
    )
    max_file_mb: int = Field(default=1024, ge=1, description="largest file code may write (RLIMIT_FSIZE)")
    tmp_mb: int = Field(default=256, ge=1, description="size of the private /tmp")
    work_quota_mb: int = Field(default=4096, ge=1, description="disk the user's files may use, all threads together")
    work_max_files: int = Field(default=100_000, ge=10, description="files and directories the user may keep")
    disk_reserve_mb: int = Field(
        default=1024, ge=0, description="free disk kept for the database and other users: code stops below it"
    )
    env: list[str] = Field(default_factory=list, description="names of server environment variables code may see")
    bwrap: str = Field(default="bwrap", description="the bubblewrap program (a name on PATH or a path)")


@dataclass(frozen=True)
class IsolationReport:
    """Whether code can be isolated here (``agent-memory doctor``)."""

    available: bool
    mode: str
    detail: str
    bwrap: str | None = None


@dataclass
class SandboxedCommand:
    """What to start: argv, the descriptors it inherits, and the files to close once it has started."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    close_after_start: list[int] = field(default_factory=list)
    cleanup: list[Path] = field(default_factory=list)  # files to remove after the run (isolation "none" only)
    cgroup: RunCgroup | None = None  # the run's own cgroup (root), removed after the run

    def release(self) -> str | None:
        """After the run: remove its cgroup; a note for its output when it ran out of memory."""
        cgroup, self.cgroup = self.cgroup, None
        return None if cgroup is None else cgroup.release()

    def close(self) -> None:
        for fd in self.close_after_start:
            try:
                os.close(fd)
            except OSError:
                pass
        self.close_after_start.clear()


def find_bwrap(policy: SandboxPolicy) -> str:
    """The bubblewrap executable, or :class:`SandboxUnavailable`."""
    found = shutil.which(policy.bwrap)
    if found is None:
        raise SandboxUnavailable(f"bubblewrap ({policy.bwrap!r}) was not found, so code was not run: {INSTALL_HINT}")
    return found


def isolation_report(policy: SandboxPolicy | None = None) -> IsolationReport:
    """Try the sandbox once (a real ``bwrap`` run of ``true``) and say whether code would be isolated."""
    policy = policy or SandboxPolicy()
    if policy.isolation == "none":
        return IsolationReport(False, "none", "isolation is off (executor isolation `none`): single trusted user only")
    try:
        bwrap = find_bwrap(policy)
    except SandboxUnavailable as exc:
        return IsolationReport(False, "unavailable", str(exc))
    mode = "per-user uid (root)" if os.geteuid() == 0 else "mount namespace (this OS user)"
    if os.geteuid() == 0 and policy.run_limits == "cgroup":
        try:
            run_cgroup(16, 4).release()
        except CgroupUnavailable as exc:
            return IsolationReport(False, "unavailable", str(exc))
        mode += ", whole-run limits in a cgroup"
    try:
        filter_fd = _filter_fd()
    except SandboxUnavailable as exc:
        return IsolationReport(False, "unavailable", str(exc), bwrap)
    argv = [bwrap, *_namespace_args(policy), "--seccomp", str(filter_fd)]
    argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        result = subprocess.run(argv, capture_output=True, timeout=30, check=False, pass_fds=(filter_fd,))
    except (OSError, subprocess.SubprocessError) as exc:
        return IsolationReport(False, "unavailable", f"bubblewrap failed to start: {exc}; {INSTALL_HINT}", bwrap)
    finally:
        os.close(filter_fd)
    if result.returncode != 0:
        why = result.stderr.decode(errors="replace").strip()[-300:]
        return IsolationReport(False, "unavailable", f"bubblewrap cannot create namespaces: {why}; {INSTALL_HINT}")
    return IsolationReport(True, mode, f"bubblewrap {bwrap}: namespaces work", bwrap)


def _filter_fd() -> int:
    try:
        return seccomp_filter_fd()
    except SeccompUnavailable as exc:
        raise SandboxUnavailable(f"{exc}, so code was not run") from exc


def _namespace_args(policy: SandboxPolicy) -> list[str]:
    args = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent"]
    args.append("--new-session")  # no TIOCSTI into the server's terminal
    if policy.network == "none":
        args.append("--unshare-net")
    if os.geteuid() != 0:
        # Unprivileged: a user namespace gives bubblewrap its mounts; none may be made inside it.
        args += ["--unshare-user", "--disable-userns"]
    return args


def read_uid_registry(text: str) -> dict[str, int]:
    """The uid of each owner, from the text of ``UID_REGISTRY`` (empty when the file is new)."""
    known: dict[str, int] = json.loads(text) if text.strip() else {}
    return known


def sandbox_uid(home: Path, owner: str) -> int:
    """The unprivileged uid ``owner``'s code runs as (only used when this process is root).

    Derived from a hash of ``owner``; the first uid free of system accounts and of other owners is recorded in
    ``home/sandbox-uids.json`` (mode 600, under a lock), so it stays the same across restarts.
    """
    home.mkdir(parents=True, exist_ok=True)
    registry = home / UID_REGISTRY
    fd = os.open(registry, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "r+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        text = handle.read()
        known = read_uid_registry(text)
        if owner in known:
            return known[owner]
        taken = set(known.values())
        digest = int.from_bytes(hashlib.sha256(owner.encode()).digest()[:8], "big")
        for step in range(UID_SPAN):
            uid = UID_BASE + (digest + step) % UID_SPAN
            if uid not in taken and not _uid_in_use(uid):
                break
        known[owner] = uid
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(known, indent=0, sort_keys=True))
        handle.flush()
        os.fsync(handle.fileno())
    return uid


def _uid_in_use(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def prepare_work_dir(work_dir: Path, uid: int | None) -> int:
    """Create ``work_dir`` (mode 700, owned by ``uid`` when given) and return an ``O_PATH`` descriptor of it.

    The parents are created by this process and stay its own; the last component is opened with ``O_NOFOLLOW``
    relative to its parent's descriptor, so a symlink planted in its place is refused instead of followed, and
    ownership is changed through the descriptor, never through a path.
    """
    parent = work_dir.parent
    parent.mkdir(parents=True, exist_ok=True)
    parent_fd = os.open(parent, os.O_PATH | os.O_DIRECTORY)
    try:
        try:
            os.mkdir(work_dir.name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            pass
        try:
            fd = os.open(work_dir.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
        except OSError as exc:
            raise SandboxUnavailable(f"the work directory {work_dir} is not a plain directory: {exc}") from exc
    finally:
        os.close(parent_fd)
    try:
        if uid is not None:
            os.fchown(fd, uid, uid)
        os.fchmod(fd, 0o700)
    except OSError:
        os.close(fd)
        raise
    return fd


def _system_mounts() -> list[str]:
    """Read-only system directories; merged-/usr symlinks (``/bin -> usr/bin``) are recreated as symlinks."""
    args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _interpreter_mounts(made: set[str]) -> list[str]:
    """This Python (its venv and its base installation) read-only, at the same paths, so ``python`` works."""
    args: list[str] = []
    for prefix in dict.fromkeys((sys.base_prefix, sys.prefix)):
        if not prefix.startswith("/usr/"):
            args += [*_parent_dirs(prefix, made), "--ro-bind", prefix, prefix]
    return args


def _parent_dirs(path: str, made: set[str]) -> list[str]:
    """Traversable (0755) empty parents for a mount point: bubblewrap would make them 0700 root, and the code's
    uid could not reach what is mounted below. They hold nothing of the host's."""
    args: list[str] = []
    for parent in reversed(Path(path).parents):
        name = str(parent)
        if name in ("/", "/tmp") or name in made:
            continue
        made.add(name)
        args += ["--perms", "0755", "--dir", name]
    return args


def sandbox_environment(policy: SandboxPolicy, home: str, extra: dict[str, str]) -> dict[str, str]:
    """The whole environment of the code: an allowlist, never the server's secrets."""
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    env = {"PATH": path, "HOME": home, "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
    for name in (*BASE_ENV, *policy.env):
        if name in os.environ:
            env[name] = os.environ[name]
    env.update(extra)
    return env


def limit_args(policy: SandboxPolicy, nproc_headroom: int = 0) -> list[str]:
    """``prlimit`` options for the run (inherited by every process of it)."""
    mb = 1024 * 1024
    return [
        f"--cpu={policy.cpu_seconds}",
        f"--data={policy.memory_mb * mb}",
        f"--fsize={policy.max_file_mb * mb}",
        f"--nproc={policy.max_processes + nproc_headroom}",
        "--core=0",
    ]


def tasks_of_uid(uid: int) -> int:
    """Processes and threads of ``uid`` now: RLIMIT_NPROC counts them all, so a run as this process's own user
    needs that much headroom above its limit."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return count


def block_file_name(code: str, work_dir: Path) -> str | None:
    """The ``# filename: NAME`` a block's first line asks for, relative to ``work_dir``; None without one.

    Judged by its text alone (no ``..``; an absolute name must lie under ``work_dir``): the server never resolves
    a path in which the user's code could have planted links; the sandboxed code writes the file itself.
    Raises ``ValueError`` for a name outside the work directory.

    Example:
        >>> block_file_name("# filename: src/app.py\\nprint(1)", Path("/w/t1"))
        'src/app.py'
    """
    first_line = code.split("\n", 1)[0]
    if not first_line.startswith("# filename:"):
        return None
    name = first_line.split(":")[1].strip()  # AutoGen's reading of the line
    path = PurePosixPath(name)
    if path.is_absolute():
        path = path.relative_to(work_dir)  # ValueError when it is elsewhere
    if not path.parts or ".." in path.parts or "\x00" in name:
        raise ValueError(f"file name {name!r} is not in the workspace")
    return str(path)


def block_program(lang: str, filename: str | None) -> list[str]:
    """How to run a block whose code is at ``{code}``; a ``# filename:`` block is saved under that name first."""
    if lang == "python":
        run = [sys.executable, "{code}"]
    else:
        program = lang_to_cmd(lang)
        run = [program, "-NoProfile", "-ExecutionPolicy", "Bypass", "-File", "{code}"] if (
            program == "pwsh"
        ) else [program, "{code}"]  # fmt: skip
    if filename is None:
        return run
    # Written by the sandboxed code's own user, inside the sandbox: never by this process.
    return ["/bin/sh", "-c", 'cat "$1" > "$2" && shift 2 && exec "$@"', "sh", "{code}", filename, *run[:-1],
            filename]  # fmt: skip


def sandboxed_command(
    policy: SandboxPolicy,
    *,
    work_dir: Path,
    work_dir_fd: int,
    uid: int | None,
    code: bytes,
    code_name: str,
    program: list[str],
    env: dict[str, str],
) -> SandboxedCommand:
    """The command that runs ``program`` (which refers to the code as ``{code}``) in a fresh sandbox.

    ``uid``: the identity to switch to inside (root only), else None to stay this user.
    """
    bwrap = find_bwrap(policy)
    filter_fd = _filter_fd()
    code_fd = os.memfd_create("agent-memory-block", os.MFD_CLOEXEC)
    os.write(code_fd, code)
    os.lseek(code_fd, 0, os.SEEK_SET)
    code_path = f"{CODE_DIR}/{code_name}"
    argv = ["prlimit", *limit_args(policy, 0 if uid is not None else tasks_of_uid(os.getuid())), "--", bwrap]
    argv += _namespace_args(policy)
    argv += ["--seccomp", str(filter_fd), "--clearenv"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    made: set[str] = set()
    argv += _system_mounts()
    tmp_bytes = str(policy.tmp_mb * 1024 * 1024)
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", tmp_bytes, "--perms", "1777", "--tmpfs", "/tmp"]
    # /dev is a tmpfs the sandboxed user owns when bubblewrap runs unprivileged (half the RAM, no limit counts it):
    # shared memory gets its own size-limited tmpfs, and /dev itself is read-only.
    argv += ["--size", tmp_bytes, "--perms", "1777", "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    argv += _interpreter_mounts(made) + _parent_dirs(str(work_dir), made)
    argv += ["--bind-fd", str(work_dir_fd), str(work_dir), "--chdir", str(work_dir)]
    argv += ["--perms", "0444", "--ro-bind-data", str(code_fd), code_path]
    argv.append("--")
    if uid is not None:
        argv += [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
    argv += [part.replace("{code}", code_path) for part in program]
    command = SandboxedCommand(argv, pass_fds=(work_dir_fd, code_fd, filter_fd), close_after_start=[code_fd, filter_fd])
    if uid is not None and policy.run_limits == "cgroup":
        try:
            command.cgroup = run_cgroup(policy.run_memory_mb, policy.max_processes, uid=uid)
        except CgroupUnavailable as exc:
            command.close()
            raise SandboxUnavailable(str(exc)) from exc
        command.argv = command.cgroup.join_command(command.argv)
    return command
