"""How much disk a user's code may fill, attacked as a chat user whose code tries to fill it.

Each attack would complete without the disk guard (agent_memory/agents/_disk_guard.py): the writers below write
far more than the limits and only stop when the run is stopped.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock

from agent_memory.agents import (
    ExecutorSpec,
    LocalProcessGroupExecutor,
    SandboxPolicy,
    isolation_report,
    user_work_root,
)
from agent_memory.agents._disk_guard import DISK_QUOTA_EXIT_CODE, DiskGuard, DiskLimits, _tally, measure_work
from agent_memory.agents._process_run import run_program
from agent_memory.agents._sandbox import SandboxedCommand

pytestmark = pytest.mark.skipif(not isolation_report().available, reason="bubblewrap is not usable here")

MB = 1024 * 1024
# Writes `total_mb` in 1 MB chunks over files of 20 MB (each under the per-file limit), then says so.
WRITER = """
import os
chunk = b"x" * (1 << 20)
for n in range({total_mb} // 20):
    with open(f"{prefix}{{n}}.bin", "wb") as f:
        for _ in range(20):
            f.write(chunk)
            f.flush()
print("wrote everything")
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def executor_for(home: Path, user: str, thread: str = "t1", **policy: object) -> LocalProcessGroupExecutor:
    return LocalProcessGroupExecutor(
        timeout=60,
        work_dir=user_work_root(home, user) / thread,
        owner=user,
        home=home,
        sandbox=SandboxPolicy(**policy),
    )


async def run(executor: LocalProcessGroupExecutor, code: str, language: str = "python") -> tuple[int, str]:
    result = await executor.execute_code_blocks([CodeBlock(code, language)], CancellationToken())
    return result.exit_code, result.output


def usage_mb(home: Path, user: str) -> float:
    root = user_work_root(home, user)
    return sum(f.stat().st_blocks * 512 for f in root.rglob("*") if f.is_file() and not f.is_symlink()) / MB


def free_mb(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize // MB


async def test_code_writing_past_the_users_quota_is_stopped(home: Path) -> None:
    alice = executor_for(home, "alice", work_quota_mb=20)

    code, out = await run(alice, WRITER.format(total_mb=1000, prefix="big"))

    assert code == DISK_QUOTA_EXIT_CODE
    assert "wrote everything" not in out
    assert "over your quota of 20 MB" in out
    assert usage_mb(home, "alice") < 500


async def test_the_quota_counts_every_thread_of_the_user(home: Path) -> None:
    first_thread = user_work_root(home, "alice") / "t1"
    first_thread.mkdir(parents=True)
    (first_thread / "a.bin").write_bytes(b"a" * 22 * MB)
    second_thread = executor_for(home, "alice", "t2", work_quota_mb=20)

    code, out = await run(second_thread, "echo hi", "bash")

    assert code == 0
    assert "over your quota of 20 MB" in out


async def test_a_second_thread_cannot_grow_past_the_quota_the_first_filled(home: Path) -> None:
    assert (await run(executor_for(home, "alice", "t1", work_quota_mb=40), WRITER.format(total_mb=20, prefix="a")))[
        0
    ] == 0
    second_thread = executor_for(home, "alice", "t2", work_quota_mb=40)

    code, out = await run(second_thread, WRITER.format(total_mb=1000, prefix="b"))

    assert code == DISK_QUOTA_EXIT_CODE
    assert "over your quota of 40 MB" in out
    assert (user_work_root(home, "alice") / "t1" / "a0.bin").stat().st_size == 20 * MB  # the other thread's file


async def test_one_users_quota_is_not_charged_to_another(home: Path) -> None:
    assert (await run(executor_for(home, "alice", work_quota_mb=30), WRITER.format(total_mb=20, prefix="a")))[0] == 0

    code, out = await run(executor_for(home, "bob", work_quota_mb=30), WRITER.format(total_mb=20, prefix="b"))

    assert (code, out.strip()) == (0, "wrote everything")


async def test_a_user_over_quota_may_delete_files_but_not_grow(home: Path) -> None:
    alice_dir = user_work_root(home, "alice") / "t1"
    alice_dir.mkdir(parents=True)
    (alice_dir / "old.bin").write_bytes(b"y" * 22 * MB)  # from before the quota was lowered
    alice = executor_for(home, "alice", work_quota_mb=20)

    grow_code, grow_out = await run(alice, WRITER.format(total_mb=1000, prefix="more"))
    delete_code, delete_out = await run(alice, "rm -f old.bin more*.bin && echo cleaned", "bash")

    assert grow_code == DISK_QUOTA_EXIT_CODE and "wrote everything" not in grow_out
    assert delete_code == 0 and "cleaned" in delete_out
    assert "over your quota" in delete_out  # the note of a run that started over quota
    assert usage_mb(home, "alice") < 1


async def test_past_the_slack_a_block_that_wrote_stops_all_blocks_until_files_are_deleted(home: Path) -> None:
    alice_dir = user_work_root(home, "alice") / "t1"
    alice_dir.mkdir(parents=True)
    (alice_dir / "old.bin").write_bytes(b"y" * 280 * MB)  # the slack over 20 MB is 256 MB
    alice = executor_for(home, "alice", work_quota_mb=20)

    wrote_code, _out = await run(alice, WRITER.format(total_mb=1000, prefix="more"))
    refused_code, refused = await run(alice, "open('ran', 'w').close()")
    (alice_dir / "old.bin").unlink()  # an administrator cleans up
    for extra in alice_dir.glob("more*.bin"):
        extra.unlink()
    after_cleanup = await run(alice, "print('runs again')")

    assert wrote_code == DISK_QUOTA_EXIT_CODE
    assert refused_code == DISK_QUOTA_EXIT_CODE and refused.startswith("Not run: your files use")
    assert "no code runs until files are deleted" in refused and not (alice_dir / "ran").exists()
    assert after_cleanup == (0, "runs again\n")


async def test_past_the_slack_a_block_that_only_deletes_runs(home: Path) -> None:
    alice_dir = user_work_root(home, "alice") / "t1"
    alice_dir.mkdir(parents=True)
    (alice_dir / "old.bin").write_bytes(b"y" * 280 * MB)
    alice = executor_for(home, "alice", work_quota_mb=20)

    code, out = await run(alice, "rm old.bin && echo cleaned", "bash")

    assert (code, out.split("\n")[0]) == (0, "cleaned")
    assert (await run(alice, "echo next", "bash")) == (0, "next\n")


async def test_hard_links_count_once(home: Path) -> None:
    alice = executor_for(home, "alice", work_quota_mb=100)
    assert (await run(alice, "head -c 1M /dev/urandom > data; for i in $(seq 400); do ln data link$i; done", "bash"))[
        0
    ] == 0

    code, out = await run(alice, "echo fine", "bash")

    assert (code, out) == (0, "fine\n")  # 1 MB on disk, not 401 MB over quota


async def test_a_file_held_open_without_a_name_counts_toward_the_quota(home: Path) -> None:
    alice = executor_for(home, "alice", work_quota_mb=50)
    unnamed = (
        "import os\nfd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600)\nchunk = b'x' * (8 << 20)\n"
        "for _ in range(250):\n    os.write(fd, chunk)\nprint('held 2 GB')\n"
    )

    code, out = await run(alice, unnamed)

    assert code == DISK_QUOTA_EXIT_CODE
    assert "held 2 GB" not in out and "more than your quota leaves room for" in out


async def test_short_runs_each_writing_between_two_checks_cannot_add_up_past_the_slack(home: Path) -> None:
    alice = executor_for(home, "alice", work_quota_mb=40)  # no block starts past 40 + 256 MB
    burst = "import uuid\nopen(f'{uuid.uuid4()}.bin', 'wb').write(b'x' * (30 << 20))\n"  # may end before a check

    codes = [(await run(alice, burst))[0] for _ in range(16)]  # 480 MB if nothing stopped them

    assert codes[-1] == DISK_QUOTA_EXIT_CODE
    assert usage_mb(home, "alice") <= 40 + 256 + 2 * 30  # one more block may start past the slack


async def test_creating_files_past_the_file_limit_is_stopped(home: Path) -> None:
    alice = executor_for(home, "alice", work_max_files=500)
    spam = "import os\nos.mkdir('spam')\nfor n in range(200_000):\n    open(f'spam/{n}', 'w').close()\n"
    spam += "print('all made')\n"

    code, out = await run(alice, spam)

    assert code == DISK_QUOTA_EXIT_CODE
    assert "all made" not in out and "500 entries" in out
    assert len(os.listdir(user_work_root(home, "alice") / "t1" / "spam")) < 200_000


async def test_no_code_runs_while_the_disk_is_below_its_reserve(home: Path) -> None:
    alice = executor_for(home, "alice", disk_reserve_mb=free_mb(home.parent) + 100_000)

    code, out = await run(alice, "open('ran', 'w').close()")

    assert code == DISK_QUOTA_EXIT_CODE
    assert out.startswith("Not run: the server's disk is nearly full") and "kept free" in out
    assert not (user_work_root(home, "alice") / "t1" / "ran").exists()


async def test_a_run_that_brings_the_disk_below_its_reserve_is_stopped(home: Path) -> None:
    alice = executor_for(home, "alice", disk_reserve_mb=max(free_mb(home.parent) - 60, 0))

    code, out = await run(alice, WRITER.format(total_mb=1000, prefix="fill"))

    assert code == DISK_QUOTA_EXIT_CODE
    assert "wrote everything" not in out and "kept free for the database and other users" in out


async def test_links_the_code_makes_are_not_followed_when_its_files_are_counted(home: Path) -> None:
    alice = executor_for(home, "alice", work_quota_mb=5)
    # /usr holds far more than 5 MB: counted through these links, alice would be over quota.
    assert (await run(alice, "ln -s /usr usr_link && ln -s / root_link", "bash"))[0] == 0

    code, out = await run(alice, "echo still fine", "bash")

    assert (code, out.strip()) == (0, "still fine")


def test_files_are_counted_in_bytes_allocated_and_entries_past_the_limit_given(tmp_path: Path) -> None:
    for n in range(50):
        (tmp_path / f"f{n}").write_bytes(b"z" * 8192)

    whole = measure_work(tmp_path, 1000)
    cut = measure_work(tmp_path, 10)

    assert whole.files == 51  # the 50 files and the directory itself
    assert whole.bytes >= 50 * 8192
    assert cut.files > 10  # enough to tell it is over the limit (counting may stop there)


async def test_a_run_whose_disk_use_cannot_be_watched_is_stopped(tmp_path: Path) -> None:
    class BrokenGuard(DiskGuard):
        async def watch(self) -> str:
            raise OSError("statvfs failed")

    guard = BrokenGuard(tmp_path, DiskLimits(MB, 10, 0))
    command = SandboxedCommand(["bash", "-c", "sleep 30; echo finished"])

    ran = await run_program(command, limit_s=60, cap=1000, token=CancellationToken(), disk=guard)

    assert ran.exit_code == DISK_QUOTA_EXIT_CODE
    assert b"finished" not in ran.kept and b"could not be watched" in ran.kept


def test_the_team_specs_executor_section_sets_the_disk_limits() -> None:
    policy = ExecutorSpec(work_quota_mb=100, work_max_files=2000, disk_reserve_mb=0).sandbox_policy()

    assert (policy.work_quota_mb, policy.work_max_files, policy.disk_reserve_mb) == (100, 2000, 0)


async def test_hard_links_count_toward_the_entries_limit(home: Path) -> None:
    # Counted once for their bytes, links still cost every count a name each: millions of them made counts
    # take seconds of the server's CPU while the user stayed under quota.
    alice = executor_for(home, "alice", work_max_files=500)
    links = "import os\nfor n in range(4):\n    open(f'f{n}', 'w').close()\n"  # 65,000 links at most per file
    links += "for n in range(100_000):\n    os.link(f'f{n % 4}', f'l{n}')\nprint('linked')\n"

    code, out = await run(alice, links)

    assert code == DISK_QUOTA_EXIT_CODE and "linked" not in out and "500 entries" in out
    assert len(os.listdir(user_work_root(home, "alice") / "t1")) < 100_000


async def test_a_run_is_watched_while_the_event_loops_thread_pool_is_busy(tmp_path: Path) -> None:
    # The free-space readings went through asyncio.to_thread: slow counts of other runs filled the shared pool
    # and a run wrote 1.5 GB over a 100 MB quota unwatched.
    loop = asyncio.get_running_loop()
    busy = threading.Event()
    blocked = [loop.run_in_executor(None, busy.wait) for _ in range(40)]  # more than the pool has threads
    root = tmp_path / "work" / "alice"
    root.mkdir(parents=True)
    guard = DiskGuard(root, DiskLimits(20 * MB, 1000, 0))
    writer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "chunk = b'x' * (1 << 20)\nwith open('big', 'wb') as f:\n    for _ in range(1000):\n"
        "        f.write(chunk); f.flush()\n", cwd=root,
    )  # fmt: skip
    try:
        assert await guard.before_run() == (None, None)
        reason = await asyncio.wait_for(guard.watch(), 30)
    finally:
        writer.kill()
        await writer.wait()
        busy.set()
        await asyncio.gather(*blocked)

    assert "over your quota of 20 MB" in reason or "more than your quota leaves room for" in reason


async def test_past_the_slack_a_run_that_did_not_write_does_not_clear_what_another_wrote(tmp_path: Path) -> None:
    # Two threads of one user: A started past the slack and wrote; B started after A's write and wrote
    # nothing, and its count cleared the lock, so every round let A write again.
    root = tmp_path / "work" / "alice"
    (root / "t1").mkdir(parents=True)
    (root / "t1" / "old.bin").write_bytes(b"y" * 300 * MB)  # past 20 MB + 256 MB
    limits = DiskLimits(20 * MB, 100_000, 0)
    a, b = DiskGuard(root, limits), DiskGuard(root, limits)
    assert (await a.before_run())[0] is None
    (root / "t1" / "more.bin").write_bytes(b"z" * 10 * MB)  # A writes
    assert (await b.before_run())[0] is None  # B starts past the slack too, with A's write in its count

    a.after_run()
    await asyncio.wrap_future(_pending(root))
    b.after_run()
    await asyncio.wrap_future(_pending(root))
    refused, _note = await DiskGuard(root, limits).before_run()

    assert refused is not None and "no code runs until files are deleted" in refused


def _pending(root: Path) -> Future[None]:
    pending = _tally(root).pending
    assert pending is not None
    return pending
