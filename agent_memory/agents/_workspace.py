"""Where a user's code runs on disk, and removing it when the user is forgotten.

Layout: ``$AGENT_MEMORY_HOME/work/<user>/<thread>``; ``<user>`` and ``<thread>`` are :func:`safe_path_part` names.
Skills run in the thread's directory too, so a user's whole footprint on disk is ``work/<user>``.

Example:
    >>> from pathlib import Path
    >>> user_work_root(Path("/srv/am"), "alice").parent
    PosixPath('/srv/am/work')
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path

from pydantic import BaseModel

from ._cgroups import remove_user_cgroups
from ._disk_guard import forget_count
from ._sandbox import UID_REGISTRY, read_uid_registry


def safe_path_part(value: str) -> str:
    """A directory name for a user or thread id: readable prefix + short hash (distinct ids stay distinct)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", value).strip("._")[:40] or "x"
    return f"{slug}-{hashlib.sha256(value.encode()).hexdigest()[:10]}"


def user_work_root(home: Path, user_id: str) -> Path:
    """The directory holding every thread work directory of ``user_id``."""
    return home / "work" / safe_path_part(user_id)


class RemovedFiles(BaseModel):
    """What :func:`forget_user_files` removed (the CLI prints it as a receipt)."""

    directories: list[str] = []
    files: int = 0
    bytes: int = 0
    released_uid: int | None = None


def forget_user_files(home: Path, user_id: str) -> RemovedFiles:
    """Remove the user's work and skill directories and release their sandbox uid.

    The tree is the user's code's own making, so it is walked by coreutils' ``find`` and ``rm`` (iterative, by
    directory descriptor): links it holds are removed, never followed, and a tree nested thousands deep (past
    Python's recursion limit and PATH_MAX) goes like any other. Raises ``OSError`` when something stays.
    """
    receipt = RemovedFiles()
    root = user_work_root(home, user_id)
    uid = _registered_uid(home, user_id)
    if uid is not None and os.geteuid() == 0:
        end_processes_of(uid)  # a run still going would write on while its files are removed, and keep its group
    if root.is_symlink():
        root.unlink()
        receipt.directories.append(str(root))
    elif root.is_dir():
        sizes = _run(["find", "-P", str(root), "-xdev", "!", "-type", "d", "-printf", "%s\\n"])
        receipt.files = len(sizes.split())
        receipt.bytes = sum(int(size) for size in sizes.split())
        _run(["rm", "-rf", "--one-file-system", "--", str(root)])
        receipt.directories.append(str(root))
    receipt.released_uid = _release_uid(home, user_id)
    if receipt.released_uid is not None and os.geteuid() == 0:
        remove_user_cgroups(receipt.released_uid)
    forget_count(root)
    return receipt


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise OSError(f"{argv[0]} failed on a user's work directory: {done.stderr.strip()[-500:]}")
    return done.stdout


def end_processes_of(uid: int, passes: int = 50) -> None:
    """Kill every process running as ``uid`` (a sandbox uid: no one else uses it), again until none is left
    (one may fork while the others are killed)."""
    for _ in range(passes):
        found = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:  # the status, not the directory's owner: a process that made itself undumpable shows root there
                with open(f"/proc/{entry.name}/status", encoding="utf-8") as status:
                    uids = next((line.split()[1:] for line in status if line.startswith("Uid:")), [])
                if str(uid) not in uids:
                    continue
                os.kill(int(entry.name), signal.SIGKILL)
                found = True
            except (FileNotFoundError, ProcessLookupError):
                continue
        if not found:
            return


def _registered_uid(home: Path, owner: str) -> int | None:
    try:
        text = (home / UID_REGISTRY).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return read_uid_registry(text).get(owner)


def _release_uid(home: Path, owner: str) -> int | None:
    registry = home / UID_REGISTRY
    try:
        fd = os.open(registry, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "r+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        known = read_uid_registry(handle.read())
        uid = known.pop(owner, None)
        if uid is not None:
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps(known, indent=0, sort_keys=True))
    return uid
