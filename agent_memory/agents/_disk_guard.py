"""How much disk a user's code may fill: a quota on the user's files and a reserve kept free on the disk.

Without a guard, one chat user's code could fill the disk that PostgreSQL, the server and every other user
write to. Kernel quotas need mount options a product cannot count on, so the guard watches while code runs:

* **Reserve.** The free space of the filesystem holding the work directories is read (``statvfs``) every
  50 ms. Below ``disk_reserve_mb`` (or 50,000 free inodes) the run is stopped, and no run starts while it stays
  there: the reserve is what keeps the database and the other users working.
* **Quota.** The user's files (every thread's work directory: ``work/<user>``) are counted in bytes allocated
  and inodes (a file with several hard links once) by ``find -P -xdev`` at low priority, which never follows a
  link the code made and is stopped past the file limit. They are counted while a block runs (every second,
  and at once when the disk's use grew by the room the user had left) and after it ends, in the background; a
  block starts from the last count. A run that takes the files over ``work_quota_mb`` or ``work_max_files``
  is stopped (exit 122, the number of ``EDQUOT``).
* **What counting cannot see.** Between two counts (a tree that is slow to count), and for files the code holds
  open without a name (``O_TMPFILE``, deleted while open), the disk's own free space is the measure: a run
  during which the disk filled beyond what the counted files grew by, by more than the user's room plus a
  slack (a quarter of the quota, at least 256 MB), is stopped.
* **Over quota.** A block still runs, so that code can delete files; it is stopped as soon as it writes. Past
  the quota plus the slack, one more block runs; if it (or another block that started past the slack) wrote,
  no block starts until a count shows the files back within the slack (an administrator's cleanup counts at
  the next block).
* **Cost.** Entries are names: hard links cost a count what files do, so the file limit bounds every count.
  Counts run in threads of their own (not the event loop's shared pool, where slow counts queued the free-space
  readings and left runs unwatched), and the free space is read on the loop itself (a ``statvfs``).

Enforcement is by watching, so a run can overshoot by what it writes in 50 ms plus the slack; the reserve
absorbs that. The disk's free space also moves with other users' writes: a run of a user with little room can
be stopped because someone else wrote hundreds of MB at the same moment.

Example:
    >>> limits = DiskLimits(quota_bytes=1 << 30, max_files=100_000, reserve_bytes=1 << 30)
    >>> limits.max_files
    100000
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

DISK_QUOTA_EXIT_CODE = 122  # EDQUOT, "disk quota exceeded"
RESERVE_INODES = 50_000
FREE_SPACE_PERIOD_S = 0.05
WALK_PERIOD_S = 1.0
# The slack over the quota: room for what a run writes between two checks, so code that overshot can still run.
SLACK_SHARE = 4
SLACK_MIN_BYTES = 256 * 1024 * 1024
SLACK_MIN_FILES = 1000
_WAIT_FOR_COUNT_S = 30.0
COUNT_THREADS = 4
_MB = 1024 * 1024
_VANISHED = b"No such file or directory"  # code deleting its files while they are counted: not an error
_UNREADABLE = b"Permission denied"


class WorkNotMeasurable(RuntimeError):
    """The user's files could not be counted (a directory that cannot be read), so code does not run."""


@dataclass(frozen=True)
class DiskLimits:
    """The quota of one user's files and the free space kept on the disk."""

    quota_bytes: int
    max_files: int
    reserve_bytes: int

    @property
    def slack_bytes(self) -> int:
        return max(self.quota_bytes // SLACK_SHARE, SLACK_MIN_BYTES)

    @property
    def slack_files(self) -> int:
        return max(self.max_files // SLACK_SHARE, SLACK_MIN_FILES)

    @property
    def hard_files(self) -> int:
        return self.max_files + self.slack_files

    def over_quota(self, usage: WorkUsage) -> bool:
        return usage.over(self.quota_bytes, self.max_files)

    def past_slack(self, usage: WorkUsage) -> bool:
        return usage.over(self.quota_bytes + self.slack_bytes, self.hard_files)


@dataclass(frozen=True)
class WorkUsage:
    """Bytes allocated (each inode once) and entries (files, directories, links: every name) under a work root."""

    bytes: int = 0
    files: int = 0

    def over(self, max_bytes: int, max_files: int) -> bool:
        return self.bytes > max_bytes or self.files > max_files

    def grew_from(self, before: WorkUsage) -> bool:
        return self.bytes > before.bytes or self.files > before.files


@dataclass(frozen=True)
class FreeSpace:
    bytes: int
    inodes: int | None  # None: the filesystem does not count inodes (btrfs)


def free_space(path: Path) -> FreeSpace:
    """Free space for unprivileged writers on the filesystem of ``path`` (or of its nearest existing parent)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    st = os.statvfs(path)
    return FreeSpace(st.f_bavail * st.f_frsize, st.f_favail if st.f_files else None)


def measure_work(root: Path, stop_after_files: int, *, skip_unreadable: bool = False) -> WorkUsage:
    """What ``root`` holds, counted without following links: bytes allocated, each inode once, and entries
    (names); counting stops past ``stop_after_files`` entries. ``skip_unreadable``: directories the server
    cannot read are left out (a server running as the code's own uid, which can make them unreadable),
    instead of :class:`WorkNotMeasurable`."""
    if not root.is_dir():
        return WorkUsage()
    argv = ["nice", "-n", "19", "find", "-P", str(root), "-xdev", "-printf", "%y %i %n %b\\n"]
    blocks = files = 0
    linked: set[bytes] = set()  # inodes with several names (hard links), counted at their first name
    with tempfile.TemporaryFile() as errors:
        pipe, devnull = subprocess.PIPE, subprocess.DEVNULL
        with subprocess.Popen(argv, bufsize=0, cwd="/", stdin=devnull, stdout=pipe, stderr=errors) as proc:
            assert proc.stdout is not None
            rest = b""
            while chunk := proc.stdout.read(1 << 16):
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    kind, inode, names, allocated = line.split(b" ")
                    files += 1  # every name: a million hard links cost a count as much as a million files
                    if names != b"1" and kind != b"d":
                        if inode in linked:
                            continue
                        linked.add(inode)
                    blocks += int(allocated)
                if files > stop_after_files:
                    proc.kill()
                    break
        errors.seek(0)
        ignored = (_VANISHED, _UNREADABLE) if skip_unreadable else (_VANISHED,)
        unexpected = [line for line in errors.read().splitlines() if not any(word in line for word in ignored)]
    if files <= stop_after_files and proc.returncode != 0 and unexpected:
        detail = unexpected[-1].decode(errors="replace")[-300:]
        raise WorkNotMeasurable(f"your files could not be counted ({detail}); make every directory readable")
    return WorkUsage(bytes=blocks * 512, files=files)


@dataclass
class _Tally:
    """What this process knows of one user's files: the last count, the counts asked for after runs, whether
    one is queued, and whether a run that started past the quota's slack wrote more (until a count shows the
    files back within it)."""

    usage: WorkUsage | None = None
    asked: int = 0
    done: int = 0
    queued: bool = False
    pending: Future[None] | None = None  # the last count asked for after a run
    past_slack_starts: list[WorkUsage] = field(default_factory=list)  # of runs that began past the slack
    grew_past_slack: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


_TALLIES: dict[Path, _Tally] = {}
_TALLIES_LOCK = threading.Lock()
# Counting runs in threads of its own: in the event loop's shared pool, slow counts (many users' trees) queued
# the free-space readings and every other ``to_thread`` behind them, and runs went unwatched.
_COUNTING = ThreadPoolExecutor(max_workers=COUNT_THREADS, thread_name_prefix="agent-memory-disk-count")


def _tally(root: Path) -> _Tally:
    with _TALLIES_LOCK:
        return _TALLIES.setdefault(root, _Tally())


def forget_count(root: Path) -> None:
    """Drop what is known of ``root``'s files (its user was forgotten)."""
    with _TALLIES_LOCK:
        _TALLIES.pop(root, None)


class DiskGuard:
    """Checks one block's run against the user's quota and the disk's reserve (see the module docstring).

    Example:
        >>> guard = DiskGuard(Path("/srv/am/work/alice"), DiskLimits(1 << 30, 100_000, 1 << 30))
        >>> guard.root.name
        'alice'
    """

    def __init__(self, root: Path, limits: DiskLimits, *, skip_unreadable: bool | None = None) -> None:
        self.root = root
        self.limits = limits
        # As root the counting reads everything; as the code's own uid, the code can hide a directory from it.
        self._skip_unreadable = os.geteuid() != 0 if skip_unreadable is None else skip_unreadable
        self._start = WorkUsage()

    def _measure(self) -> WorkUsage:
        return measure_work(self.root, self.limits.hard_files, skip_unreadable=self._skip_unreadable)

    def _count(self) -> WorkUsage:
        usage = self._measure()
        self._record(usage)
        return usage

    def _record(self, usage: WorkUsage, *, ticket: int | None = None) -> None:
        tally = _tally(self.root)
        with tally.lock:
            if ticket is not None:
                if ticket <= tally.done:  # a later count finished first
                    return
                tally.done = ticket
            tally.usage = usage
            if not self.limits.past_slack(usage):
                tally.grew_past_slack = False  # back within the slack: blocks may write again

    async def _counted(self) -> WorkUsage:
        return await asyncio.get_running_loop().run_in_executor(_COUNTING, self._count)

    async def before_run(self) -> tuple[str | None, str | None]:
        """(why the block must not run, or None; a note for the output, or None)."""
        if (reason := self._reserve_reached(free_space(self.root))) is not None:
            return reason, None
        tally = _tally(self.root)
        if (pending := tally.pending) is not None and not pending.done():  # the count the last block asked for
            with contextlib.suppress(TimeoutError):  # shielded: a Stop here must not drop a queued count
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(pending)), _WAIT_FOR_COUNT_S)
        usage = tally.usage
        try:
            if usage is None or self.limits.over_quota(usage):
                usage = await self._counted()  # over quota: what was deleted since counts now
        except WorkNotMeasurable as exc:
            return str(exc), None
        self._start = usage
        if self.limits.past_slack(usage) and tally.grew_past_slack:
            return (
                f"{self._describe(usage)}, past the slack above it, and a run since wrote more: no code runs "
                f"until files are deleted (an administrator can delete them in {self.root}, or raise "
                "executor.work_quota_mb and work_max_files)"
            ), None
        if self.limits.over_quota(usage):
            return None, f"Note: {self._describe(usage)}: code that writes is stopped; delete files you do not need"
        return None, None

    def after_run(self) -> None:
        """Count the user's files in the background: the next block starts from what this one left. Counts
        asked for while one waits to start are answered by it."""
        tally = _tally(self.root)
        with tally.lock:
            tally.asked += 1
            if self.limits.past_slack(self._start):
                tally.past_slack_starts.append(self._start)
            if tally.queued:
                return
            tally.queued = True
            tally.pending = _COUNTING.submit(self._count_after_run)

    def _count_after_run(self) -> None:
        tally = _tally(self.root)
        with tally.lock:
            tally.queued = False
            ticket = tally.asked  # every run that asked so far has ended: this count sees what they left
            starts, tally.past_slack_starts = tally.past_slack_starts, []
        try:
            usage = self._measure()
        except (OSError, WorkNotMeasurable):
            with tally.lock:
                tally.usage, tally.done = None, max(tally.done, ticket)  # the next block counts, and says why not
            return
        if any(usage.grew_from(start) for start in starts):
            with tally.lock:
                tally.grew_past_slack = True  # kept until a count shows the files back within the slack
        self._record(usage, ticket=ticket)

    async def watch(self) -> str:
        """Return (only) when the run must stop, saying why."""
        usage = self._start
        at_start = since = free_space(self.root)  # since: when the last count began
        counting: asyncio.Future[WorkUsage] | None = None
        counting_since, counted_at, count_cost = since, time.monotonic(), 0.0
        try:
            while True:
                await asyncio.sleep(FREE_SPACE_PERIOD_S)
                free = free_space(self.root)  # a statvfs: microseconds, on the loop so nothing queues it
                if (reason := self._reserve_reached(free)) is not None:
                    return reason
                if counting is not None and counting.done():
                    try:
                        counted = counting.result()
                    except WorkNotMeasurable as exc:
                        return str(exc)
                    counting, since, count_cost = None, counting_since, time.monotonic() - counted_at
                    if self.limits.over_quota(counted) and counted.grew_from(usage):
                        return f"{self._describe(counted)}; delete files you no longer need"
                    usage = counted
                if (reason := self._unexplained_fill(at_start, free, usage)) is not None:
                    return reason
                if counting is None and self._count_due(since, free, usage, counted_at, count_cost):
                    counting_since, counted_at = free, time.monotonic()
                    counting = asyncio.ensure_future(self._counted())
        finally:
            if counting is not None:
                counting.cancel()  # its thread finishes on its own and records what it found

    def _count_due(self, since: FreeSpace, free: FreeSpace, usage: WorkUsage, counted_at: float, cost: float) -> bool:
        """Now when the disk grew by the user's room; else once a second, and never more than a fifth of the
        time on a tree that is slow to count."""
        room_bytes = self.limits.quota_bytes - usage.bytes
        room_files = self.limits.max_files - usage.files
        grew = since.bytes - free.bytes >= room_bytes or (
            free.inodes is not None and since.inodes is not None and since.inodes - free.inodes >= room_files
        )
        elapsed = time.monotonic() - counted_at
        return grew or (elapsed >= WALK_PERIOD_S and elapsed >= 5 * cost)

    def _unexplained_fill(self, at_start: FreeSpace, free: FreeSpace, usage: WorkUsage) -> str | None:
        """The disk filled during the run by more than the user's counted files grew, and by more than their room
        and the slack: files written since the last count, or held open without a name."""
        filled = at_start.bytes - free.bytes - (usage.bytes - self._start.bytes)
        filled_inodes = 0
        if free.inodes is not None and at_start.inodes is not None:
            filled_inodes = at_start.inodes - free.inodes - (usage.files - self._start.files)
        over_bytes = filled > max(self.limits.quota_bytes - usage.bytes, 0) + self.limits.slack_bytes
        if over_bytes or filled_inodes > max(self.limits.max_files - usage.files, 0) + self.limits.slack_files:
            return (
                f"the disk filled by {filled // _MB} MB and {filled_inodes} inodes during this run beyond your "
                f"counted files, more than your quota leaves room for ({self.limits.quota_bytes // _MB} MB and "
                f"{self.limits.max_files} entries; files held open without a name count too)"
            )
        return None

    def _reserve_reached(self, free: FreeSpace) -> str | None:
        if free.bytes < self.limits.reserve_bytes or (free.inodes is not None and free.inodes < RESERVE_INODES):
            return (
                f"the server's disk is nearly full ({free.bytes // _MB} MB free, under the "
                f"{self.limits.reserve_bytes // _MB} MB kept free for the database and other users): an "
                "administrator must free space on it"
            )
        return None

    def _describe(self, usage: WorkUsage) -> str:
        return (
            f"your files use {usage.bytes // _MB} MB in {usage.files} entries, over your quota of "
            f"{self.limits.quota_bytes // _MB} MB and {self.limits.max_files} entries"
        )
