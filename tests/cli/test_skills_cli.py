"""``agent-memory skills``: list, show, approve, reject, disable, export, import, prune, stats (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.skills import procedural_memory

from agent_memory import MemoryStore
from agent_memory.skills import ProceduralMemory, ProceduralMemorySettings

ADD = "def add_numbers(a: int, b: int) -> int:\n    return a + b\n"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_memory.cli", "skills", *args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)  # fmt: skip


async def pending_skill(store: MemoryStore, user: str, tmp_path: Path, agent: str = "coder") -> ProceduralMemory:
    skills = procedural_memory(store, user, agent, work_dir=tmp_path / "sandbox",
                               settings=ProceduralMemorySettings(require_skill_approval=True))  # fmt: skip
    await skills.register_skill("add_numbers", "Add two integers", ADD, tags=["math"])
    return skills


async def test_list_show_and_approve_a_pending_skill(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = await pending_skill(store, user_id, tmp_path)
    listed = run("list", "--user", user_id, "--status", "pending_approval", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert (row["name"], row["agent_id"], row["status"], row["version"]) == (
        "add_numbers",
        "coder",
        "pending_approval",
        1,
    )
    assert "code" not in row

    shown = run("show", "add_numbers", "--user", user_id, "--code")
    assert shown.returncode == 0, shown.stderr
    assert "pending_approval" in shown.stdout and "def add_numbers" in shown.stdout and "v1 (0/0 ok)" in shown.stdout

    approved = run("approve", "add_numbers", "--user", user_id)
    assert approved.returncode == 0, approved.stderr
    assert "now active" in approved.stdout
    assert (await skills.use_skill("add_numbers", {"a": 1, "b": 2})).output.strip() == "3"


async def test_reject_and_disable_change_the_status(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = await pending_skill(store, user_id, tmp_path)
    assert run("reject", "add_numbers", "--user", user_id).returncode == 0
    assert (await skills.get_skill("add_numbers")).status == "rejected"
    assert run("disable", "add_numbers", "--user", user_id, "--agent", "coder", "--json").returncode == 0
    assert (await skills.get_skill("add_numbers")).status == "disabled"


async def test_another_users_skill_is_not_found(
    store: MemoryStore, user_id: str, other_user_id: str, tmp_path: Path
) -> None:
    await pending_skill(store, user_id, tmp_path)
    for command in ("show", "approve", "reject", "disable"):
        result = run(command, "add_numbers", "--user", other_user_id)
        assert result.returncode == 1, (command, result.stderr)
        assert "skill 'add_numbers' not found" in result.stderr
    assert run("list", "--user", other_user_id).stdout.strip() == "no skills"


async def test_ambiguous_name_asks_for_the_agent(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    await pending_skill(store, user_id, tmp_path, agent="coder")
    await pending_skill(store, user_id, tmp_path, agent="analyst")
    result = run("approve", "add_numbers", "--user", user_id)
    assert result.returncode == 2
    assert "several agents (analyst, coder)" in result.stderr
    assert run("approve", "add_numbers", "--user", user_id, "--agent", "analyst").returncode == 0


async def test_export_then_import_for_another_user(
    store: MemoryStore, user_id: str, other_user_id: str, tmp_path: Path
) -> None:
    await pending_skill(store, user_id, tmp_path)
    exported = run("export", str(tmp_path / "out"), "--user", user_id, "--json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["exported"] == [str(tmp_path / "out" / "add-numbers")]
    assert (tmp_path / "out" / "add-numbers" / "SKILL.md").is_file()

    imported = run("import", str(tmp_path / "out"), "--user", other_user_id, "--agent", "helper", "--json")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout) == [
        {"name": "add_numbers", "action": "created", "version": 1, "status": "active"}
    ]
    theirs = procedural_memory(store, other_user_id, "helper", work_dir=tmp_path / "s2")
    assert (await theirs.get_skill("add_numbers")).code == ADD
    assert run("import", str(tmp_path / "nowhere"), "--user", other_user_id, "--agent", "helper").returncode == 2


async def test_prune_dry_run_and_stats(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    await pending_skill(store, user_id, tmp_path)
    dry = run("prune", "--user", user_id, "--unused-days", "0", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert [s["name"] for s in json.loads(dry.stdout)["skills"]] == ["add_numbers"]
    stats = run("stats", "--user", user_id, "--json")
    assert json.loads(stats.stdout)["by_status"] == {"pending_approval": 1}
    assert run("prune", "--user", user_id, "--unused-days", "0").returncode == 0
    assert json.loads(run("stats", "--user", user_id, "--json").stdout)["total"] == 0


async def test_show_an_old_version_and_delete(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = await pending_skill(store, user_id, tmp_path)
    await skills.register_skill("add_numbers", "Add two integers", ADD.replace("a + b", "b + a"))
    old = run("show", "add_numbers", "--user", user_id, "--version", "1", "--code")
    assert (old.returncode, old.stdout) == (0, ADD + "\n")
    assert run("show", "add_numbers", "--user", user_id, "--version", "7").returncode == 2
    assert run("delete", "add_numbers", "--user", user_id).returncode == 0
    assert run("show", "add_numbers", "--user", user_id).returncode == 1
