"""How much disk a user's code may fill: a quota on the user's files and a reserve kept free on the disk.

Without a guard, one chat user's code could fill the disk that PostgreSQL, the server and every other user
write to. Kernel quotas need mount options a product cannot count on, so the guard watches while code runs:

* **Reserve.** The free space of the filesystem holding the work directories is read (``statvfs``) every
  50 ms. Below ``disk_reserve_mb`` (or 50,000 free inodes) the run is stopped, and no run starts while it stays
  there: the reserve is what keeps the database and the other users working.
* **Quota.** The user's files (every thread's work directory: ``work/<user>``) are counted in bytes allocated
  and entries by ``find -P -xdev``, which never follows a link the code made and is stopped past the file
  limit. They are counted while a block runs (every second, and at once when the disk's use grew by the room
  the user had left) and after it ends, in the background; a block starts from the last count. A run that
  takes the files over ``work_quota_mb`` or ``work_max_files`` is stopped (exit 122, the number of
  ``EDQUOT``). Over quota, a block still runs, so that code can delete files, but it is stopped as soon as it
  writes; past the quota plus a quarter of it (at least 256 MB and 1,000 entries: a lowered quota, or many
  short runs each writing between two checks) no block starts.

Enforcement is by watching, so a run can overshoot by what it writes between two checks (tens of MB at disk
speed); the slack above the quota and the reserve absorb that.

Example:
    >>> limits = DiskLimits(quota_bytes=1 << 30, max_files=100_000, reserve_bytes=1 << 30)
    >>> limits.max_files
    100000
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

DISK_QUOTA_EXIT_CODE = 122  # EDQUOT, "disk quota exceeded"
RESERVE_INODES = 50_000
FREE_SPACE_PERIOD_S = 0.05
WALK_PERIOD_S = 1.0
# No block starts past the quota plus a quarter of it (at least 256 MB and 1,000 entries): room for what a run
# writes between two checks, so code that overshot can still run to delete.
SLACK_SHARE = 4
SLACK_MIN_BYTES = 256 * 1024 * 1024
SLACK_MIN_FILES = 1000
_WAIT_FOR_COUNT_S = 30.0
_MB = 1024 * 1024
_VANISHED = b"No such file or directory"  # code deleting its files while they are counted: not an error


class WorkNotMeasurable(RuntimeError):
    """The user's files could not be counted (a directory that cannot be read), so code does not run."""


@dataclass(frozen=True)
class DiskLimits:
    """The quota of one user's files and the free space kept on the disk."""

    quota_bytes: int
    max_files: int
    reserve_bytes: int


@dataclass(frozen=True)
class WorkUsage:
    """Bytes allocated and entries (files, directories, links) under a user's work root."""

    bytes: int = 0
    files: int = 0


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


def measure_work(root: Path, stop_after_files: int) -> WorkUsage:
    """What ``root`` holds, counted without following links; counting stops past ``stop_after_files`` entries."""
    if not root.is_dir():
        return WorkUsage()
    argv = ["find", "-P", str(root), "-xdev", "-printf", "%b\\n"]
    blocks = files = 0
    with tempfile.TemporaryFile() as errors:
        pipe, devnull = subprocess.PIPE, subprocess.DEVNULL
        with subprocess.Popen(argv, bufsize=0, cwd="/", stdin=devnull, stdout=pipe, stderr=errors) as proc:
            assert proc.stdout is not None
            rest = b""
            while chunk := proc.stdout.read(1 << 16):
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                files += len(lines)
                blocks += sum(map(int, lines))
                if files > stop_after_files:
                    proc.kill()
                    break
        errors.seek(0)
        unexpected = [line for line in errors.read().splitlines() if _VANISHED not in line]
    if files <= stop_after_files and proc.returncode != 0 and unexpected:
        detail = unexpected[-1].decode(errors="replace")[-300:]
        raise WorkNotMeasurable(f"your files could not be counted ({detail}); make every directory readable")
    return WorkUsage(bytes=blocks * 512, files=files)


@dataclass
class _Tally:
    """The last count of one user's files in this process, and the counts asked for after runs."""

    usage: WorkUsage | None = None
    asked: int = 0
    done: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)


_TALLIES: dict[Path, _Tally] = {}
_TALLIES_LOCK = threading.Lock()


def _tally(root: Path) -> _Tally:
    with _TALLIES_LOCK:
        return _TALLIES.setdefault(root, _Tally())


def forget_count(root: Path) -> None:
    """Drop what is known of ``root``'s files (its user was forgotten)."""
    with _TALLIES_LOCK:
        _TALLIES.pop(root, None)


def _count(root: Path, stop_after_files: int) -> WorkUsage:
    usage = measure_work(root, stop_after_files)
    tally = _tally(root)
    with tally.changed:
        tally.usage = usage
    return usage


def _count_after_run(root: Path, stop_after_files: int, ticket: int) -> None:
    tally = _tally(root)
    try:
        usage: WorkUsage | None = measure_work(root, stop_after_files)
    except (OSError, WorkNotMeasurable):
        usage = None  # the next block counts again, and says why it cannot
    with tally.changed:
        if ticket > tally.done:  # a later count may have finished first
            tally.usage, tally.done = usage, ticket
            tally.changed.notify_all()


def _counted_after_runs(tally: _Tally) -> None:
    with tally.changed:
        tally.changed.wait_for(lambda: tally.done >= tally.asked, timeout=_WAIT_FOR_COUNT_S)


class DiskGuard:
    """Checks one block's run against the user's quota and the disk's reserve (see the module docstring).

    Example:
        >>> guard = DiskGuard(Path("/srv/am/work/alice"), DiskLimits(1 << 30, 100_000, 1 << 30))
        >>> guard.root.name
        'alice'
    """

    def __init__(self, root: Path, limits: DiskLimits) -> None:
        self.root = root
        self.limits = limits
        self._usage = WorkUsage()
        self._hard_bytes = limits.quota_bytes + max(limits.quota_bytes // SLACK_SHARE, SLACK_MIN_BYTES)
        self._hard_files = limits.max_files + max(limits.max_files // SLACK_SHARE, SLACK_MIN_FILES)

    async def before_run(self) -> tuple[str | None, str | None]:
        """(why the block must not run, or None; a note for the output, or None)."""
        free = await asyncio.to_thread(free_space, self.root)
        if (reason := self._reserve_reached(free)) is not None:
            return reason, None
        tally = _tally(self.root)
        await asyncio.to_thread(_counted_after_runs, tally)  # the count the previous block asked for as it ended
        usage = tally.usage
        if usage is None:
            try:
                usage = await asyncio.to_thread(_count, self.root, self._hard_files)
            except WorkNotMeasurable as exc:
                return str(exc), None
        self._usage = usage
        if usage.bytes > self._hard_bytes or usage.files > self._hard_files:
            return f"{self._describe(usage)} by more than a run may overshoot; delete files, or ask to raise the " \
                "quota (executor.work_quota_mb, work_max_files)", None  # fmt: skip
        if usage.bytes > self.limits.quota_bytes or usage.files > self.limits.max_files:
            return None, f"Note: {self._describe(usage)}: code that writes is stopped; delete what you do not need"
        return None, None

    def after_run(self) -> None:
        """Count the user's files in the background: the next block starts from what this one left."""
        tally = _tally(self.root)
        with tally.changed:
            tally.asked += 1
            ticket = tally.asked
        args = (self.root, self._hard_files, ticket)
        threading.Thread(target=_count_after_run, args=args, name="agent-memory-disk-count", daemon=True).start()

    async def watch(self) -> str:
        """Return (only) when the run must stop, saying why."""
        last = await asyncio.to_thread(free_space, self.root)
        walked_at = time.monotonic()
        walk_cost = 0.0
        while True:
            await asyncio.sleep(FREE_SPACE_PERIOD_S)
            free = await asyncio.to_thread(free_space, self.root)
            if (reason := self._reserve_reached(free)) is not None:
                return reason
            now = time.monotonic()
            room_bytes = self.limits.quota_bytes - self._usage.bytes
            room_files = self.limits.max_files - self._usage.files
            grew = last.bytes - free.bytes >= room_bytes or (
                free.inodes is not None and last.inodes is not None and last.inodes - free.inodes >= room_files
            )
            # A big tree is not counted back to back: at most a quarter of the time goes to counting it.
            if (grew or now - walked_at >= WALK_PERIOD_S) and now - walked_at >= 4 * walk_cost:
                previous, last, walked_at = self._usage, free, now
                try:
                    self._usage = await asyncio.to_thread(_count, self.root, self._hard_files)
                except WorkNotMeasurable as exc:
                    return str(exc)
                walk_cost = time.monotonic() - now
                if self._over_quota(self._usage) and self._grew(previous, self._usage):
                    return f"{self._describe(self._usage)}; delete files you no longer need"

    def _over_quota(self, usage: WorkUsage) -> bool:
        return usage.bytes > self.limits.quota_bytes or usage.files > self.limits.max_files

    @staticmethod
    def _grew(before: WorkUsage, after: WorkUsage) -> bool:
        """Over quota, code that reads or deletes goes on; code that writes does not."""
        return after.bytes > before.bytes or after.files > before.files

    def _reserve_reached(self, free: FreeSpace) -> str | None:
        if free.bytes < self.limits.reserve_bytes:
            return (
                f"the disk of the work directories has {free.bytes // _MB} MB free, under the "
                f"{self.limits.reserve_bytes // _MB} MB kept free for the database and other users; free space on "
                "it (or lower executor.disk_reserve_mb)"
            )
        if free.inodes is not None and free.inodes < RESERVE_INODES:
            return f"the disk of the work directories has {free.inodes} free inodes left; free space on it"
        return None

    def _describe(self, usage: WorkUsage) -> str:
        return (
            f"your files use {usage.bytes // _MB} MB in {usage.files} entries, over your quota of "
            f"{self.limits.quota_bytes // _MB} MB and {self.limits.max_files} entries"
        )
