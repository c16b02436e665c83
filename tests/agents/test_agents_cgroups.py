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


def test_on_cgroup_v2_a_run_is_a_leaf_of_its_users_cgroup_limited_in_memory_swap_and_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_RUNS_MEMORY_MB", "4096")
    root = _v2_root(tmp_path)
    cgroup = run_cgroup(512, 64, root=root, uid=1_500_000_123)
    [run] = cgroup.dirs
    assert run.parent == root / GROUP / "user-1500000123" and run.name.startswith("run-")
    assert (run / "memory.max").read_text() == str(512 * 2**20)
    assert (run / "memory.swap.max").read_text() == "0"
    assert (run / "pids.max").read_text() == "64"
    assert (root / GROUP / "memory.max").read_text() == str(4096 * 2**20)  # all runs together
    assert (root / GROUP / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"  # users share the CPU
    assert (run.parent / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert cgroup.join_command(["true"])[4:] == [str(run / "cgroup.procs"), "--", "true"]


def test_on_cgroup_v2_two_runs_of_a_user_share_its_cgroup_and_another_users_do_not(tmp_path: Path) -> None:
    root = _v2_root(tmp_path)

    first, second = run_cgroup(64, 8, root=root, uid=7), run_cgroup(64, 8, root=root, uid=7)
    other = run_cgroup(64, 8, root=root, uid=8)

    assert first.dirs[0].parent == second.dirs[0].parent != other.dirs[0].parent
    assert first.dirs == [first.dirs[0]] and first.dirs[0].name.startswith("run-")  # release removes the run only


def test_on_cgroup_v1_a_run_has_a_memory_and_a_pids_cgroup_and_joins_its_users_cpu_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_RUNS_MEMORY_MB", "4096")
    root = tmp_path / "cgroup1"
    for controller in ("memory", "pids", "cpu"):
        (root / controller).mkdir(parents=True)
        (root / controller / "cgroup.procs").write_text("")
    cgroup = run_cgroup(512, 64, root=root, uid=42)
    memory, pids = cgroup.dirs
    assert (memory.parent, pids.parent) == (root / "memory" / GROUP, root / "pids" / GROUP)
    assert (memory / "memory.limit_in_bytes").read_text() == str(512 * 2**20)
    assert (pids / "pids.max").read_text() == "64"
    assert (root / "memory" / GROUP / "memory.limit_in_bytes").read_text() == str(4096 * 2**20)
    assert root / "cpu" / GROUP / "user-42" / "cgroup.procs" in cgroup.procs
    assert root / "cpu" / GROUP / "user-42" not in cgroup.dirs  # its user's CPU group outlives the run


def test_without_a_writable_hierarchy_the_error_says_what_to_change(tmp_path: Path) -> None:
    with pytest.raises(CgroupUnavailable, match="run_limits"):
        run_cgroup(512, 64, root=tmp_path / "nothing-here")
