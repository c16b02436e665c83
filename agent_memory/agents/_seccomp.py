"""The system calls sandboxed code may not make: a seccomp filter that bubblewrap loads before the code starts.

Namespaces and a per-user uid keep users apart in the file system and the process table, but some kernel
objects lie outside every namespace bubblewrap makes. The filter refuses, like Docker's default profile:

* the kernel keyrings (``keyctl``, ``add_key``, ``request_key``): a run would share the server's session keyring
  (and could read or revoke its keys), and each uid's user keyring outlives the run, even a forgotten user whose
  uid is given out again;
* new namespaces and mounts (``unshare``, ``setns``, ``mount`` and the new mount API, ``clone`` with a namespace
  flag; ``clone3`` answers "not implemented", so the C library falls back to ``clone``, whose flags a filter can
  read): in a new user namespace code holds every capability over it, e.g. to mount a tmpfs no limit reaches;
* ``fallocate``: space reserved past a file's end (``FALLOC_FL_KEEP_SIZE``) escapes the file-size limit; programs
  fall back to writing, which the limit counts;
* kernel interfaces ordinary programs never need and that widen what an attacker can reach (``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``io_uring``, module loading, ``kexec``, ``open_by_handle_at``, ...).

Everything else is allowed (a denylist), so ordinary programs run unchanged; a refused call fails with EPERM.
System calls of another architecture (32-bit ``int 0x80`` on x86-64) kill the process: libseccomp's default.
The filter is compiled with libseccomp (through ``pyseccomp``); without it no code runs.

Example:
    >>> import os
    >>> fd = seccomp_filter_fd()
    >>> os.fstat(fd).st_size > 0
    True
    >>> os.close(fd)
"""

from __future__ import annotations

import errno
import os
from typing import Any

SECCOMP_HINT = "install libseccomp (Debian/Ubuntu: `apt-get install libseccomp2`; Fedora: `dnf install libseccomp`)"

REFUSED = (
    # kernel keyrings
    "keyctl", "add_key", "request_key",
    # namespaces and mounts
    "unshare", "setns", "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount",
    "fsconfig", "fspick", "mount_setattr", "chroot",
    # space beyond the file-size limit
    "fallocate",
    # kernel interfaces code does not need
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "open_by_handle_at",
    "name_to_handle_at", "lookup_dcookie", "quotactl", "acct", "swapon", "swapoff", "reboot", "syslog",
    "process_vm_writev", "iopl", "ioperm", "vhangup", "nfsservctl",
)  # fmt: skip

# clone() flags that make a namespace (CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET).
NAMESPACE_FLAGS = (0x80, 0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000)


class SeccompUnavailable(RuntimeError):
    """libseccomp is missing: the filter cannot be built (the message says what to install)."""


def _library() -> Any:
    try:
        import pyseccomp
    except (ImportError, RuntimeError, OSError) as exc:  # pyseccomp raises RuntimeError without libseccomp
        raise SeccompUnavailable(f"the seccomp filter cannot be built ({exc}): {SECCOMP_HINT}") from exc
    return pyseccomp


def seccomp_filter_fd() -> int:
    """A memory file holding the compiled filter (BPF), at offset 0, for ``bwrap --seccomp FD``."""
    lib = _library()
    refuse = lib.ERRNO(errno.EPERM)
    syscall_filter = lib.SyscallFilter(defaction=lib.ALLOW)
    for name in REFUSED:
        try:
            syscall_filter.add_rule(refuse, name)
        except (ValueError, OSError):  # a call this kernel or libseccomp version does not know: nothing to refuse
            continue
    for flag in NAMESPACE_FLAGS:
        syscall_filter.add_rule(refuse, "clone", lib.Arg(0, lib.MASKED_EQ, flag, flag))
    syscall_filter.add_rule(lib.ERRNO(errno.ENOSYS), "clone3")
    fd = os.memfd_create("agent-memory-seccomp", os.MFD_CLOEXEC)
    try:
        syscall_filter.export_bpf(_Descriptor(fd))
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Descriptor:
    """What ``export_bpf`` asks of a file: its descriptor."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd
