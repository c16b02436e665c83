"""The cgroup layout of a run, as the sandbox writes it on cgroup v2 and v1.

The kernel's enforcement is tested in test_agents_sandbox.py on this machine's real cgroups (v1 here). This file
checks what is written where for both versions, in a directory standing in for /sys/fs/cgroup: the v2 branch has
no other test on a v1 machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.agents._cgroups import GROUP, CgroupUnavailable, run_cgroup


def _v2_root(tmp_path: Path) -> Path:
    root = tmp_path / "cgroup2"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / GROUP).mkdir()
    (root / GROUP / "cgroup.subtree_control").write_text("")
    return root


def test_on_cgroup_v2_a_run_is_a_leaf_limited_in_memory_swap_and_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_RUNS_MEMORY_MB", "4096")
    root = _v2_root(tmp_path)
    cgroup = run_cgroup(512, 64, root=root)
    [run] = cgroup.dirs
    assert run.parent == root / GROUP and run.name.startswith("run-")
    assert (run / "memory.max").read_text() == str(512 * 2**20)
    assert (run / "memory.swap.max").read_text() == "0"
    assert (run / "pids.max").read_text() == "64"
    assert (root / GROUP / "memory.max").read_text() == str(4096 * 2**20)  # all runs together
    assert (root / GROUP / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert cgroup.join_command(["true"])[4:] == [str(run / "cgroup.procs"), "--", "true"]


def test_on_cgroup_v1_a_run_has_a_memory_and_a_pids_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_RUNS_MEMORY_MB", "4096")
    root = tmp_path / "cgroup1"
    for controller in ("memory", "pids"):
        (root / controller).mkdir(parents=True)
        (root / controller / "cgroup.procs").write_text("")
    cgroup = run_cgroup(512, 64, root=root)
    memory, pids = cgroup.dirs
    assert (memory.parent, pids.parent) == (root / "memory" / GROUP, root / "pids" / GROUP)
    assert (memory / "memory.limit_in_bytes").read_text() == str(512 * 2**20)
    assert (pids / "pids.max").read_text() == "64"
    assert (root / "memory" / GROUP / "memory.limit_in_bytes").read_text() == str(4096 * 2**20)


def test_without_a_writable_hierarchy_the_error_says_what_to_change(tmp_path: Path) -> None:
    with pytest.raises(CgroupUnavailable, match="run_limits"):
        run_cgroup(512, 64, root=tmp_path / "nothing-here")
