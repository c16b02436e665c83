"""The sandbox, attacked as a hostile chat user would: through the real executor, as two users, as root.

Each test names the guard it checks; removing that guard (the mount namespace, the per-user uid, the PID
namespace, the network namespace, a limit, O_NOFOLLOW, fail-closed) makes it fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock
from support.databases import open_store
from support.processes import marker_seconds, processes_with, wait_until

from agent_memory.agents import (
    ExecutorSpec,
    LocalProcessGroupExecutor,
    SandboxPolicy,
    SkillsAgentBuilder,
    forget_user_files,
    isolation_report,
    user_work_root,
)
from agent_memory.agents._cgroups import CGROUP_ROOT, GROUP, run_cgroup
from agent_memory.agents._executor import SANDBOX_UNAVAILABLE_EXIT_CODE
from agent_memory.agents._sandbox import sandbox_uid
from agent_memory.agents._seccomp import SECCOMP_HINT, SeccompUnavailable
from agent_memory.agents._skills_hook import skills_of
from agent_memory.skills import ProceduralMemorySettings

pytestmark = pytest.mark.skipif(not isolation_report().available, reason="bubblewrap is not usable here")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="per-user uids are used only when running as root")


def pids_of(pattern: str) -> list[str]:
    out = subprocess.run(["pgrep", "-a", "-f", pattern], capture_output=True, text=True, check=False).stdout
    return out.splitlines()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def executor_for(home: Path, user: str, thread: str = "t1", **policy: object) -> LocalProcessGroupExecutor:
    return LocalProcessGroupExecutor(
        timeout=20, work_dir=home / "work" / user / thread, owner=user, home=home, sandbox=SandboxPolicy(**policy)
    )


async def run(executor: LocalProcessGroupExecutor, code: str, language: str = "bash") -> tuple[int, str]:
    result = await executor.execute_code_blocks([CodeBlock(code, language)], CancellationToken())
    return result.exit_code, result.output


# ---------------------------------------------------------------- other users' files and processes


async def test_a_user_cannot_read_or_write_another_users_work_directory(home: Path) -> None:
    alice, bob = executor_for(home, "alice"), executor_for(home, "bob")
    assert (await run(alice, "echo alice-secret > notes.txt"))[0] == 0
    alice_dir = home / "work" / "alice" / "t1"

    _code, out = await run(bob, f"cat {alice_dir}/notes.txt; echo bob-was-here > {alice_dir}/planted.txt; ls {home}")

    assert "alice-secret" not in out
    assert not (alice_dir / "planted.txt").exists()
    assert "db-password" not in out and "sandbox-uids" not in out


@as_root
async def test_each_user_runs_under_their_own_stable_uid_and_owns_their_work_directory(home: Path) -> None:
    alice, bob = executor_for(home, "alice"), executor_for(home, "bob")
    alice_uid = int((await run(alice, "id -u"))[1])
    bob_uid = int((await run(bob, "id -u"))[1])

    assert alice_uid != bob_uid and 0 not in (alice_uid, bob_uid)
    # Stable across restarts: a new executor (a new process would read the same record) gets the same uid.
    assert int((await run(executor_for(home, "alice", "t2"), "id -u"))[1]) == alice_uid
    assert json.loads((home / "sandbox-uids.json").read_text()) == {"alice": alice_uid, "bob": bob_uid}
    assert stat.S_IMODE((home / "sandbox-uids.json").stat().st_mode) == 0o600
    info = (home / "work" / "alice" / "t1").stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (alice_uid, 0o700)


async def test_a_user_cannot_see_or_signal_another_users_running_process(home: Path) -> None:
    alice, bob = executor_for(home, "alice"), executor_for(home, "bob")
    seconds = marker_seconds()
    alice_run = asyncio.create_task(run(alice, f"sleep {seconds}; echo alice-finished"))
    try:
        for _ in range(1200):  # polled: another process starting is not an event we can await
            if processes_with(f"sleep {seconds}"):
                break
            await asyncio.sleep(0.05)
        host_pids = " ".join(line.split()[0] for line in pids_of(f"sleep {seconds}"))
        assert host_pids

        # '[s]leep' cannot match grep's own arguments, so the count does not depend on whether grep is listed yet
        kill_all = f"for p in {host_pids}; do kill -9 $p && echo killed-$p; done"
        probe = f"ps -eo args | grep -c '[s]leep {seconds}'; {kill_all}"
        _code, out = await run(bob, probe + "; true")

        assert "killed-" not in out
        assert out.splitlines()[0] == "0"  # alice's sleep is not in bob's process list
        assert processes_with(seconds)  # alice's process lives on
    finally:
        alice_run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await alice_run


async def test_the_servers_processes_and_files_are_invisible(home: Path, database_url: str) -> None:
    state_home = Path(os.environ["AGENT_MEMORY_HOME"])
    _code, out = await run(
        executor_for(home, "alice"),
        f"ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline | tr '\\0' ' '; echo; ls {state_home} /root 2>&1 | head -5",
    )

    assert int(out.splitlines()[0]) <= 4  # bubblewrap's init, the shell, ls, grep
    assert "pytest" not in out and "postgres" not in out
    assert "db-password" not in out and "pgdata" not in out


async def test_the_database_socket_is_unreachable(home: Path, database_url: str) -> None:
    host = parse_qs(urlsplit(database_url).query).get("host", [""])[0]
    if not host.startswith("/"):
        pytest.skip("the test database is not on a unix socket")
    sockets = [p for p in Path(host).glob(".s.PGSQL.*") if p.is_socket()]  # noqa: ASYNC240
    assert sockets
    code, out = await run(
        executor_for(home, "alice"),
        f"import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({str(sockets[0])!r})\n"
        "    print('connected')\nexcept OSError as e:\n    print(type(e).__name__)",
        "python",
    )
    assert (code, out.strip()) == (0, "FileNotFoundError")


# ---------------------------------------------------------------- paths the privileged side touches


ROOT_ONLY = "root-only-target"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file only root may change, outside every work directory."""
    target = tmp_path / ROOT_ONLY
    target.write_text("original\n")
    target.chmod(0o600)
    return target


async def test_symlinks_planted_at_every_name_the_executor_used_are_not_followed(home: Path, victim: Path) -> None:
    alice = executor_for(home, "alice")
    names = [".sandbox-probe.py", "tmp_code_x.py", "block.py", "block.bash", "a.py"]
    code = "; ".join(f"ln -sf {victim} {name}" for name in names)
    assert (await run(alice, code))[0] == 0
    for code_block, language in [
        ("print('again')", "python"),
        ("echo again", "bash"),
        ("# filename: a.py\nprint(1)", "python"),
    ]:
        await run(alice, code_block, language)
    # The thread is resumed later: a new executor on the same directory.
    assert await run(executor_for(home, "alice"), "echo resumed") == (0, "resumed\n")

    info = victim.stat()  # noqa: ASYNC240
    assert victim.read_text() == "original\n"  # noqa: ASYNC240
    assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o600


async def test_a_file_name_is_judged_by_its_text_not_through_links_the_code_planted(home: Path) -> None:
    executor = executor_for(home, "mallory")
    work = home / "work" / "mallory" / "t1"
    await run(executor, "ln -s /root hostroot")
    # Resolved on the server, hostroot/.. is / and the name lands back inside the work directory.
    code, out = await run(executor, f"# filename: hostroot/../{str(work).lstrip('/')}/ok.py\nprint('ran')", "python")
    assert (code, out) == (1, "Filename is not in the workspace\n")


async def test_a_symlink_loop_at_the_file_name_fails_the_block_not_the_executor(home: Path) -> None:
    executor = executor_for(home, "mallory")
    await run(executor, "ln -s loop loop")
    code, out = await run(executor, "# filename: loop/x.py\nprint('ran')", "python")
    assert code != 0 and "ran" not in out
    assert await run(executor, "echo still-working") == (0, "still-working\n")


async def test_a_work_directory_replaced_by_a_symlink_is_refused_not_followed(home: Path, victim: Path) -> None:
    thread_dir = home / "work" / "alice" / "t1"
    thread_dir.parent.mkdir(parents=True)
    thread_dir.symlink_to(victim.parent)
    alice = LocalProcessGroupExecutor(timeout=20, owner="alice", home=home)
    alice._work_dir = thread_dir  # as an older install would have it on disk

    code, out = await run(alice, "echo pwned > pwned.txt")

    assert code == SANDBOX_UNAVAILABLE_EXIT_CODE and "not a plain directory" in out
    assert not (victim.parent / "pwned.txt").exists()
    assert victim.parent.stat().st_uid == os.geteuid()


# ---------------------------------------------------------------- nothing outlives the run


def test_forget_user_removes_a_tree_nested_past_the_recursion_limit_without_following_links(
    home: Path, victim: Path
) -> None:
    root = user_work_root(home, "dave")
    (root / "t1").mkdir(parents=True)
    fd = os.open(root / "t1", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):  # 6,000 characters of path: past PATH_MAX and Python's recursion limit
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(parent)
    with open(os.open("notes.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as bottom:
        bottom.write("12345")
    os.symlink(victim.parent, "escape", dir_fd=fd)
    os.close(fd)

    receipt = forget_user_files(home, "dave")

    assert not root.exists()
    assert (receipt.files, receipt.bytes) == (2, 5 + len(str(victim.parent)))
    assert victim.read_text() == "original\n"


async def test_background_processes_end_with_the_run(home: Path) -> None:
    seconds = marker_seconds()
    code = (
        f"(setsid sleep {seconds} &)\nnohup sleep {seconds} >/dev/null 2>&1 &\n"
        f"bash -c '(sleep {seconds} &) &'\nsleep 0.2\necho left-behind"
    )
    result = await run(executor_for(home, "alice"), code)

    assert result == (0, "left-behind\n")
    assert processes_with(f"sleep {seconds}") == []


async def test_a_timeout_ends_every_process_of_the_run(home: Path) -> None:
    seconds = marker_seconds()
    executor = LocalProcessGroupExecutor(
        timeout=2, work_dir=home / "work" / "alice" / "t1", owner="alice", home=home, sandbox=SandboxPolicy()
    )
    code, out = await run(executor, f"(setsid sleep {seconds} &); sleep {seconds}")

    assert code == 124 and "Timeout" in out
    assert processes_with(f"sleep {seconds}") == []


# ---------------------------------------------------------------- network


@pytest.fixture
def listening_port() -> int:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


PROBE = "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('reached')\n" \
        "except OSError as e:\n    print('blocked', type(e).__name__)"  # fmt: skip


async def test_loopback_services_are_unreachable_by_default(home: Path, listening_port: int) -> None:
    _code, out = await run(executor_for(home, "alice"), PROBE.format(port=listening_port), "python")
    assert out.startswith("blocked")


async def test_network_host_opts_in(home: Path, listening_port: int) -> None:
    _code, out = await run(executor_for(home, "alice", network="host"), PROBE.format(port=listening_port), "python")
    assert out.strip() == "reached"


# ---------------------------------------------------------------- limits


async def test_a_fork_bomb_ends_and_leaves_the_server_working(home: Path) -> None:
    bomb = executor_for(home, "mallory", max_processes=30)
    bomb._timeout = 5
    _code, out = await run(bomb, "bomb() { bomb | bomb & }; bomb; sleep 2; echo survived-the-bomb")
    assert "fork" in out.lower() or "resource temporarily unavailable" in out.lower()
    # Another user's code and the server itself still run.
    assert await run(executor_for(home, "alice"), "echo fine") == (0, "fine\n")
    assert os.system("true") == 0  # noqa: ASYNC221


async def test_a_memory_bomb_is_stopped_by_the_memory_limit(home: Path) -> None:
    code, out = await run(executor_for(home, "mallory", memory_mb=200), "b = bytearray(1024 * 1024 * 1024)", "python")
    assert code != 0 and "MemoryError" in out


async def test_a_disk_filler_is_stopped_by_the_file_size_limit(home: Path) -> None:
    code, _out = await run(executor_for(home, "mallory", max_file_mb=5), "head -c 50M /dev/zero > big.bin")
    assert code != 0
    assert (home / "work" / "mallory" / "t1" / "big.bin").stat().st_size <= 5 * 1024 * 1024


async def test_shared_memory_files_are_size_limited_and_dev_is_read_only(home: Path) -> None:
    # Unprivileged, bubblewrap's /dev is a tmpfs the code's user owns, sized at half the RAM and counted by no limit.
    fill = "head -c 50M /dev/zero > /dev/shm/fill; touch /dev/x"
    code, out = await run(executor_for(home, "mallory", tmp_mb=8), fill)
    assert code != 0 and "No space left" in out and "'/dev/x': Read-only file system" in out


async def test_the_private_tmp_is_size_limited(home: Path) -> None:
    code, out = await run(executor_for(home, "mallory", tmp_mb=8), "head -c 50M /dev/zero > /tmp/fill")
    assert code != 0 and "No space left" in out


_SHARED_MEMORY = """
import mmap
block = mmap.mmap(-1, 300 * 1024 * 1024)  # shared anonymous memory: no RLIMIT_DATA counts it
block.write(b"x" * 300 * 1024 * 1024)
print("held 300 MB")
"""


@as_root
async def test_shared_memory_counts_against_the_runs_memory_limit(home: Path) -> None:
    code, out = await run(executor_for(home, "mallory", run_memory_mb=64), _SHARED_MEMORY, "python")
    assert code != 0 and "held 300 MB" not in out
    assert "used all of its memory (64 MB for the whole run" in out


_FOUR_HOLDERS = """
import glob, os, signal, time
holders = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(60 * 2**20)
        block[::4096] = b"x" * len(block[::4096])  # touched: really held
        open(f"held-{i}", "w").close()
        deadline = time.monotonic() + 20
        while len(glob.glob("held-*")) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        os._exit(0)
    holders.append(pid)
for _ in holders:
    _pid, status = os.wait()
    if status:  # one was killed: the others need not wait for it
        for pid in holders:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
"""


@as_root
async def test_the_processes_of_a_run_share_one_memory_limit(home: Path) -> None:
    # Each process stays far below the per-process limit; together they pass the run's. Each holds its 60 MB
    # until all four hold theirs (a file each marks it), so they overlap however slowly they start.
    _code, out = await run(executor_for(home, "mallory", run_memory_mb=128), _FOUR_HOLDERS, "python")
    assert "used all of its memory (128 MB" in out


@as_root
async def test_all_runs_together_stay_under_the_machines_runs_memory_limit(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each run within its own limit, many users at once could still take the host's memory from PostgreSQL.
    monkeypatch.setenv("AGENT_MEMORY_RUNS_MEMORY_MB", "96")
    code, out = await run(executor_for(home, "mallory"), _SHARED_MEMORY, "python")
    assert code != 0 and "held 300 MB" not in out
    assert "the runs of all users together used the memory they may hold (AGENT_MEMORY_RUNS_MEMORY_MB, 96 MB)" in out


@as_root
async def test_a_runs_cgroup_is_gone_when_the_run_ends(home: Path) -> None:
    before = _run_cgroups()  # a run of another process may leave one behind, for a later sweep
    assert await run(executor_for(home, "mallory"), "echo done") == (0, "done\n")
    assert _run_cgroups() <= before


@as_root
async def test_a_cancelled_runs_cgroup_is_gone_too(home: Path) -> None:
    before = _run_cgroups()
    seconds = marker_seconds()
    stopped = asyncio.create_task(run(executor_for(home, "mallory"), f"sleep {seconds}"))
    for _ in range(1200):  # polled: another process starting is not an event we can await
        if processes_with(f"sleep {seconds}"):
            break
        await asyncio.sleep(0.05)
    assert _run_cgroups() - before  # it runs in a cgroup of its own
    stopped.cancel()  # a Stop in the chat, a cancelled remote turn
    with pytest.raises(asyncio.CancelledError):
        await stopped
    assert _run_cgroups() <= before


def _run_cgroups() -> set[Path]:
    parents = [CGROUP_ROOT / group / GROUP for group in ("memory", "pids", "")]
    return {p for parent in parents for pattern in ("run-*", "user-*/run-*") for p in parent.glob(pattern)}


@as_root
async def test_each_user_gets_one_share_of_the_cpu_whatever_number_of_processes_they_run(home: Path) -> None:
    # Without a CPU group per user the scheduler shares per thread: 200 busy processes of one user would get
    # 200 shares to another user's one.
    runs = {(user, thread): marker_seconds() for user, thread in (("alice", "t1"), ("alice", "t2"), ("bob", "t1"))}
    tasks = [asyncio.create_task(run(executor_for(home, u, t), f"sleep {mark}")) for (u, t), mark in runs.items()]
    try:
        await wait_until(lambda: all(_pid_of(f"sleep {mark}") for mark in runs.values()))
        alice_1, alice_2, bob = (_cpu_group(_pid_of(f"sleep {mark}")) for mark in runs.values())
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    assert f"/{GROUP}/user-" in alice_1
    assert alice_1 == alice_2 != bob


@as_root
async def test_forgetting_a_user_removes_their_cpu_group(home: Path) -> None:
    assert (await run(executor_for(home, "dave"), "echo hi"))[0] == 0
    groups = [CGROUP_ROOT / sub / GROUP / f"user-{sandbox_uid(home, 'dave')}" for sub in ("cpu", "")]
    assert any(group.is_dir() for group in groups)

    forget_user_files(home, "dave")

    assert not any(group.exists() for group in groups)


@as_root
async def test_forgetting_a_user_during_a_run_ends_the_run_and_removes_their_cpu_group(home: Path) -> None:
    seconds = marker_seconds()
    running = asyncio.create_task(run(executor_for(home, "victor"), f"sleep {seconds}; touch after-forget"))
    await wait_until(lambda: bool(_pid_of(f"sleep {seconds}")))
    group = CGROUP_ROOT / "cpu" / GROUP / f"user-{sandbox_uid(home, 'victor')}"

    await asyncio.to_thread(forget_user_files, home, "victor")
    code, _out = await running

    assert code != 0 and not _pid_of(f"sleep {seconds}")
    assert not group.exists()
    assert not (home / "work" / "victor" / "t1" / "after-forget").exists()


def _pid_of(command: str) -> int:
    out = subprocess.run(["pgrep", "-x", "-f", command], capture_output=True, text=True, check=False).stdout.split()
    return int(out[0]) if out else 0


def _cpu_group(pid: int) -> str:
    """The CPU cgroup of a process, as the host sees it: v1's cpu line, or v2's one line without the run leaf."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _number, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
        if controllers == "":
            return path.rsplit("/", 1)[0]
    raise AssertionError(f"no cpu cgroup in {lines}")


@as_root
async def test_as_root_without_cgroups_nothing_runs_and_the_error_says_what_to_change(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent_memory.agents._cgroups.CGROUP_ROOT", tmp_path / "no-cgroups")

    code, out = await run(executor_for(home, "alice"), "touch ran.txt")

    assert code == SANDBOX_UNAVAILABLE_EXIT_CODE
    assert "cgroup" in out and "run_limits" in out
    assert not (home / "work" / "alice" / "t1" / "ran.txt").exists()


async def test_space_reserved_past_a_files_end_does_not_escape_the_file_size_limit(home: Path) -> None:
    # fallocate --keep-size reserves disk blocks without growing the file, so RLIMIT_FSIZE never sees them.
    _code, out = await run(executor_for(home, "mallory", max_file_mb=1), "touch f; fallocate -n -l 50M f; du -k f")
    assert int(out.split()[-2]) < 1024


# ---------------------------------------------------------------- kernel objects outside the namespaces

_ADD_KEY = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
KEY_SPEC_USER_KEYRING, SYS_add_key = -4, 248
got = libc.syscall(SYS_add_key, b"user", b"canary", b"secret", 6, KEY_SPEC_USER_KEYRING)
print("added" if got >= 0 else "refused", os.strerror(ctypes.get_errno()))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the test calls add_key by its x86-64 number")
async def test_kernel_keyrings_are_refused(home: Path) -> None:
    # A keyring is not in any namespace: the server's session keyring would be shared by every run, and a uid's
    # user keyring outlives the run (and the user, whose uid a new account of the same name gets again).
    _code, out = await run(executor_for(home, "mallory"), _ADD_KEY, "python")
    assert out.startswith("refused Operation not permitted"), out


async def test_code_cannot_make_namespaces_of_its_own(home: Path) -> None:
    # Inside a new user namespace code would hold every capability over it (e.g. mount a tmpfs without limit).
    _code, out = await run(executor_for(home, "mallory"), "unshare -U -r id -u; unshare -m true; echo end")
    assert out.count("Operation not permitted") == 2 and "\n0\n" not in f"\n{out}", out


# ---------------------------------------------------------------- fails closed


async def test_without_bubblewrap_nothing_runs_and_the_error_says_what_to_install(home: Path) -> None:
    executor = executor_for(home, "alice", bwrap="/nonexistent/bwrap")

    code, out = await run(executor, "touch ran.txt")

    assert code == SANDBOX_UNAVAILABLE_EXIT_CODE
    assert "apt-get install bubblewrap" in out
    assert not (home / "work" / "alice" / "t1" / "ran.txt").exists()


async def test_without_libseccomp_nothing_runs_and_the_error_says_what_to_install(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing() -> None:
        raise SeccompUnavailable("the seccomp filter cannot be built (Unable to find libseccomp): " + SECCOMP_HINT)

    monkeypatch.setattr("agent_memory.agents._seccomp._library", missing)

    code, out = await run(executor_for(home, "alice"), "touch ran.txt")

    assert code == SANDBOX_UNAVAILABLE_EXIT_CODE
    assert "apt-get install libseccomp2" in out and "not run" in out
    assert not (home / "work" / "alice" / "t1" / "ran.txt").exists()
    assert not isolation_report().available


async def test_isolation_none_is_explicit_and_reported() -> None:
    report = isolation_report(SandboxPolicy(isolation="none"))
    assert not report.available and report.mode == "none"
    missing = isolation_report(SandboxPolicy(bwrap="/nonexistent/bwrap"))
    assert not missing.available and "apt-get install bubblewrap" in missing.detail


# ---------------------------------------------------------------- skills run in the same sandbox

WHOAMI = '''\
def whoami() -> dict:
    """Report the identity and the visible root of the sandbox."""
    import os
    return {"uid": os.getuid(), "root": sorted(os.listdir("/"))}
'''


async def test_skills_run_in_the_users_sandbox(database_url: str, home: Path, user_id: str) -> None:
    async with await open_store(database_url) as store:
        builder = SkillsAgentBuilder(
            store, user_id, home=home, procedural_memory=ProceduralMemorySettings(enabled=True)
        )
        skills = skills_of(builder, "coder", "t1")
        assert skills is not None
        await skills.register_skill("whoami", "Report the sandbox identity", WHOAMI)

        result = await skills.use_skill("whoami", {})

    assert result.success, result.output
    seen = json.loads(result.output)
    assert "home" not in seen["root"] and "var" not in seen["root"]
    if os.geteuid() == 0:
        assert seen["uid"] == sandbox_uid(home, user_id)


async def test_a_sandbox_that_fails_to_start_is_reported_as_not_run(home: Path, tmp_path: Path) -> None:
    # As in a container without namespaces: bubblewrap exists but cannot set up the sandbox.
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)

    code, out = await run(executor_for(home, "alice", bwrap=str(broken)), "touch ran.txt")

    assert code == SANDBOX_UNAVAILABLE_EXIT_CODE
    assert "could not be set up" in out and "No permissions" in out and "bubblewrap" in out


def test_saved_configs_with_the_old_options_still_load(home: Path) -> None:
    config = {"timeout": 5, "work_dir": str(home / "w"), "run_as": "auto", "scrub_env": True}
    executor = LocalProcessGroupExecutor.load_component(
        {"provider": "agent_memory.agents.LocalProcessGroupExecutor", "config": config}
    )
    assert executor.sandbox.isolation == "bubblewrap"
    assert LocalProcessGroupExecutor.load_component(executor.dump_component()).sandbox == executor.sandbox


def test_the_team_specs_executor_section_sets_the_whole_run_limits() -> None:
    policy = ExecutorSpec(run_memory_mb=512, run_limits="process").sandbox_policy()
    assert (policy.run_memory_mb, policy.run_limits) == (512, "process")


@as_root
def test_making_a_runs_cgroup_leaves_the_fresh_empty_cgroup_of_another_run() -> None:
    # Empty from its creation until its run joins it: a concurrent run's sweep removed it, and that run failed.
    first = run_cgroup(64, 8)
    try:
        second = run_cgroup(64, 8)
        second.release()
        assert all(directory.is_dir() for directory in first.dirs)
    finally:
        first.release()
