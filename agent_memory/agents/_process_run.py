"""Running one sandboxed program to its end: output capped and counted, and the whole run killed on a timeout, a
cancellation or when it fills more disk than it may (:mod:`._disk_guard`).

The program starts in a session of its own, so ``killpg`` reaches bubblewrap, whose PID namespace takes every
process of the run with it.

Example:
    >>> from autogen_core import CancellationToken
    >>> from agent_memory.agents._sandbox import SandboxedCommand
    >>> ran = asyncio.run(run_program(SandboxedCommand(["echo", "hi"]), limit_s=5, cap=100,
    ...                               token=CancellationToken()))
    >>> (ran.exit_code, ran.kept)
    (0, b'hi\\n')
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass

from autogen_core import CancellationToken

from ._disk_guard import DISK_QUOTA_EXIT_CODE, DiskGuard
from ._progress import OutputTail
from ._sandbox import SandboxedCommand

KILL_GRACE_SECONDS = 2.0
_READ_CHUNK = 64 * 1024
TIMEOUT_EXIT_CODE = 124  # same codes as AutoGen's executor (and coreutils `timeout`)
CANCELLED_EXIT_CODE = 125


@dataclass(frozen=True)
class ProgramRun:
    """How one program ended: exit code, the output kept (up to the cap) and the output's whole size."""

    exit_code: int
    timed_out: bool
    kept: bytes
    total: int


async def _exited(proc: asyncio.subprocess.Process, limit_s: float) -> bool:
    """True once the process has exited (before its pipes close, which ``proc.wait()`` waits for), within
    ``limit_s``. A pidfd says so the moment it happens; polling (a kernel without pidfds) notices within 50 ms."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # before Linux 5.3; or already reaped, which polling sees at once
        return await _polled_exit(proc, limit_s)
    if proc.returncode is not None:  # reaped before the pidfd was opened: its pid may be another process's now
        os.close(pidfd)
        return True
    loop = asyncio.get_running_loop()
    exited = loop.create_future()

    def on_exit() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(pidfd, on_exit)
    try:
        await asyncio.wait_for(exited, limit_s)
        return True
    except TimeoutError:
        return proc.returncode is not None
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


async def _polled_exit(proc: asyncio.subprocess.Process, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    delay = 0.005
    while proc.returncode is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)
    return True


def kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def run_program(
    command: SandboxedCommand,
    *,
    limit_s: float,
    cap: int,
    token: CancellationToken,
    output_tail: OutputTail | None = None,
    disk: DiskGuard | None = None,
) -> ProgramRun:
    """Run ``command`` in a new session for at most ``limit_s`` seconds; keep ``cap`` bytes of its output
    (stdout and stderr interleaved)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *command.argv,
            cwd="/",  # never a directory the user controls
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            start_new_session=True,  # its own group: killpg reaches bubblewrap; the sandbox dies with it
            pass_fds=command.pass_fds,
        )
    finally:
        command.close()
    pgid = proc.pid
    assert proc.stdout is not None
    kept = bytearray()
    total = 0

    async def read_all(stream: asyncio.StreamReader) -> None:
        nonlocal total
        while chunk := await stream.read(_READ_CHUNK):
            if output_tail is not None:
                output_tail.feed(chunk)
            total += len(chunk)
            room = cap - len(kept)
            if room > 0:
                kept.extend(chunk[:room])

    reader = asyncio.create_task(read_all(proc.stdout))
    finished = False

    def on_cancel() -> None:
        if not finished:  # after the group is gone its id may be reused: never signal it then
            kill_group(pgid, signal.SIGKILL)

    # Cancelling the token kills the run even if nobody cancels this task.
    token.add_callback(on_cancel)
    watcher = asyncio.ensure_future(disk.watch()) if disk is not None else None
    if watcher is not None:  # it returns (or fails) only when the run must stop
        watcher.add_done_callback(lambda done: None if done.cancelled() else on_cancel())
    timed_out = False
    try:
        # Not ``proc.wait()``: asyncio only returns from it once every pipe is closed.
        if not await _exited(proc, limit_s):
            timed_out = True
            kill_group(pgid, signal.SIGTERM)
            if not await _exited(proc, KILL_GRACE_SECONDS):
                kill_group(pgid, signal.SIGKILL)
    except asyncio.CancelledError:
        kill_group(pgid, signal.SIGKILL)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), 10)
        finished = True
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):  # its cgroup, off the loop
            await asyncio.shield(asyncio.to_thread(command.release))
        raise
    finally:
        # Whatever the code left behind dies with bubblewrap (its PID namespace ends).
        kill_group(pgid, signal.SIGKILL)
        stopped_for_disk = _stop_watching(watcher)
    try:
        await asyncio.wait_for(reader, 10)
    except TimeoutError:  # only possible without the sandbox (isolation "none"): a descendant holds the pipe
        reader.cancel()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 10)
    finished = True
    if token.is_cancelled():
        kept.extend(b"\nCancelled: the run was killed\n")
        return ProgramRun(CANCELLED_EXIT_CODE, False, bytes(kept), total)
    if stopped_for_disk is not None:
        kept.extend(f"\nStopped: {stopped_for_disk}\n".encode())
        return ProgramRun(DISK_QUOTA_EXIT_CODE, False, bytes(kept), total)
    rc = TIMEOUT_EXIT_CODE if timed_out else (proc.returncode if proc.returncode is not None else 1)
    return ProgramRun(rc, timed_out, bytes(kept), total)


def _stop_watching(watcher: asyncio.Future[str] | None) -> str | None:
    """Why the disk guard stopped the run, or None (it is cancelled if it had not). A guard that failed stopped
    the run too: code does not run unwatched."""
    if watcher is None:
        return None
    if not watcher.done():
        watcher.cancel()
        return None
    if watcher.cancelled():
        return None
    if (exc := watcher.exception()) is not None:
        return f"the disk use of the run could not be watched ({exc!r})"
    return watcher.result()
