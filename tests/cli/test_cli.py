"""The agent-memory command, end to end in subprocesses against the test database."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory.agents import user_work_root

pytestmark = pytest.mark.usefixtures("database_url")


def run(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "agent_memory", *args],
        input=stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_store_and_retrieve_a_20mb_file_with_nul_bytes_exactly(tmp_path: Path, user_id: str) -> None:
    data = b"".join(b"row %07d \x00 value=\xe2\x9c\x85 \r\n" % i for i in range(800_000))
    assert len(data) > 20_000_000
    src = tmp_path / "big.log"
    src.write_bytes(data)
    stored = run("store", str(src), "--user", user_id, "--description", "big log", "--type", "command_output")
    assert stored.returncode == 0, stored.stderr
    key = stored.stdout.decode().strip()
    back = run("retrieve", key, "--user", user_id)
    assert back.returncode == 0, back.stderr
    assert back.stdout == data


def test_store_reads_stdin(user_id: str) -> None:
    key = run("store", "--user", user_id, stdin=b"from stdin\n").stdout.decode().strip()
    assert run("retrieve", key, "--user", user_id).stdout == b"from stdin\n"


def test_a_stored_file_without_a_description_is_described_by_its_name_and_first_line(
    tmp_path: Path, user_id: str
) -> None:
    src = tmp_path / "build.log"
    src.write_text("\nnpm WARN deprecated left-pad@1.3.0\nadded 1200 packages\n")
    item = json.loads(run("store", str(src), "--user", user_id, "--json").stdout)
    assert item["description"] == "build.log: npm WARN deprecated left-pad@1.3.0 (3 lines)"
    piped = json.loads(run("store", "--user", user_id, "--json", stdin=b"one line from a pipe\n").stdout)
    assert piped["description"] == "one line from a pipe (1 line)"


def test_retrieve_of_missing_or_foreign_key_exits_1(user_id: str, other_user_id: str) -> None:
    key = run("store", "--user", user_id, stdin=b"mine").stdout.decode().strip()
    foreign = run("retrieve", key, "--user", other_user_id)
    missing = run("retrieve", "note_ffffffffffff", "--user", other_user_id)
    assert (foreign.returncode, missing.returncode) == (1, 1)
    assert foreign.stdout == b"" and b"not found" in foreign.stderr


def test_retrieve_transforms(user_id: str) -> None:
    text = "".join(f"line {i}\n" for i in range(1, 51)).replace("line 30\n", "line 30 FATAL boom\n")
    key = run("store", "--user", user_id, stdin=text.encode()).stdout.decode().strip()
    assert run("retrieve", key, "--user", user_id, "--head", "1").stdout == b"line 1\n"
    assert run("retrieve", key, "--user", user_id, "--tail", "1").stdout == b"line 50\n"
    assert run("retrieve", key, "--user", user_id, "--lines", "2-3").stdout == b"line 2\nline 3\n"
    assert run("retrieve", key, "--user", user_id, "--grep", "fatal", "-i").stdout == b"30:line 30 FATAL boom\n"


def test_json_output_of_search_list_show_and_db_status(user_id: str) -> None:
    key = run("store", "--user", user_id, "-d", "terraform plan", "-t", "command_output",
              stdin=b"Plan: 3 to add, 0 to change").stdout.decode().strip()  # fmt: skip
    found = json.loads(run("search", "terraform plan", "--user", user_id, "--json").stdout)
    assert found[0]["memory_key"] == key and found[0]["score"] > 0
    listed = json.loads(run("list", "--user", user_id, "--json").stdout)
    assert [m["memory_key"] for m in listed] == [key]
    shown = json.loads(run("show", key, "--user", user_id, "--json").stdout)
    assert shown["description"] == "terraform plan" and shown["memory_type"] == "command_output"
    status = json.loads(run("db", "status", "--json").stdout)
    assert status["schema_version"] >= 1 and "pg_trgm" in status["extensions"]


def test_show_without_json_lists_the_fields_a_line_each(user_id: str) -> None:
    key = run("store", "--user", user_id, "-d", "terraform plan", stdin=b"Plan: 3 to add").stdout.decode().strip()
    lines = run("show", key, "--user", user_id).stdout.decode().splitlines()
    assert f"key:         {key}" in lines
    assert "description: terraform plan" in lines
    assert "last read:   never (0 reads)" in lines


def test_delete_then_retrieve_exits_1(user_id: str) -> None:
    key = run("store", "--user", user_id, stdin=b"x").stdout.decode().strip()
    assert run("delete", key, "--user", user_id).returncode == 0
    assert run("retrieve", key, "--user", user_id).returncode == 1
    assert run("delete", key, "--user", user_id).returncode == 1


def test_forget_user_needs_confirmation(user_id: str) -> None:
    run("store", "--user", user_id, stdin=b"x")
    refused = run("forget-user", "--user", user_id)
    assert refused.returncode == 2 and b"--yes" in refused.stderr
    done = json.loads(run("forget-user", "--user", user_id, "--yes", "--json").stdout)
    assert done["user"] == user_id and done["deleted_memories"] == 1


def test_forget_user_removes_their_files_and_prints_a_receipt(user_id: str, tmp_path: Path) -> None:
    run("store", "--user", user_id, stdin=b"x")
    home = Path(os.environ["AGENT_MEMORY_HOME"])
    thread_dir = user_work_root(home, user_id) / "thread-1"
    thread_dir.mkdir(parents=True)
    (thread_dir / "result.csv").write_text("a,b\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (thread_dir / "link").symlink_to(outside)  # planted by the user's code: removed, never followed

    done = json.loads(run("forget-user", "--user", user_id, "--yes", "--json").stdout)

    assert not user_work_root(home, user_id).exists()
    assert outside.read_text() == "keep me"
    assert done["removed_files"]["directories"] == [str(user_work_root(home, user_id))]
    assert done["removed_files"]["files"] == 2
    text = run("forget-user", "--user", user_id, "--yes")
    assert text.returncode == 1  # nothing is left to forget


def test_forgetting_an_unknown_user_exits_1(user_id: str) -> None:
    result = run("forget-user", "--user", user_id, "--yes")
    assert result.returncode == 1
    assert b"nothing to forget" in result.stderr


def test_list_since_takes_an_age_as_well_as_a_date(user_id: str) -> None:
    run("store", "--user", user_id, stdin=b"fresh")
    recent = json.loads(run("list", "--user", user_id, "--since", "1h", "--json").stdout)
    future = json.loads(run("list", "--user", user_id, "--since", "2999-01-01", "--json").stdout)
    assert len(recent) == 1
    assert future == []


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (("store",), b"no user"),  # missing --user
        (("store", "--user", "u", "/nonexistent/file"), None),
        (("store", "--user", "u"), b"\xff\xfe not utf-8"),
        (("store", "--user", "u", "--metadata", "{not json"), b"x"),
        (("retrieve", "note_000000000000", "--user", "u", "--grep", "([bad"), None),
        (("list", "--user", "u", "--since", "yesterday-ish"), None),
        (("search",), None),  # argparse usage error
        (("store", "--user", "x" * 10_000), b"x"),
    ],
)
def test_bad_input_exits_2_with_a_message(args: tuple[str, ...], stdin: bytes | None) -> None:
    result = run(*args, stdin=stdin)
    assert result.returncode == 2, result
    assert result.stderr.strip()


def test_a_costly_grep_exits_2_and_says_the_pattern_was_too_costly(user_id: str) -> None:
    key = run("store", "--user", user_id, stdin=b"a" * 40 + b"b").stdout.decode().strip()
    result = run(
        "retrieve", key, "--user", user_id, "--grep", "(a|aa)+$", env={"AGENT_MEMORY_GREP_TIMEOUT_SECONDS": "0.3"}
    )
    assert result.returncode == 2
    assert b"too costly" in result.stderr and b"Traceback" not in result.stderr


def test_unreachable_database_exits_3_and_says_what_to_do(user_id: str) -> None:
    result = run("list", "--user", user_id, env={"AGENT_MEMORY_DATABASE_URL": "postgresql://x:pw@127.0.0.1:1/db"})
    assert result.returncode == 3
    assert b"AGENT_MEMORY_DATABASE_URL" in result.stderr and b":pw@" not in result.stderr


def test_db_status_says_whether_executed_code_can_be_isolated(tmp_path: Path) -> None:
    status = json.loads(run("db", "status", "--json").stdout)
    assert status["isolation"]["available"] is (shutil.which("bwrap") is not None)

    without_bwrap = run("db", "status", env={"PATH": str(tmp_path)})

    assert without_bwrap.returncode == 0
    assert b"code isolation: NOT AVAILABLE" in without_bwrap.stdout
    assert b"apt-get install bubblewrap" in without_bwrap.stdout


def test_update_history_retract_and_audit_from_the_command_line(user_id: str, tmp_path: Path) -> None:
    key = run("store", "--user", user_id, "-d", "deploy target: blue-green", "-t", "user_preference",
              stdin=b"blue-green").stdout.decode().strip()  # fmt: skip
    new = tmp_path / "new.txt"
    new.write_bytes(b"canary \x00 releases\n")

    assert run("update", key, str(new), "--user", user_id, "-d", "deploy target: canary").returncode == 0
    history = json.loads(run("history", key, "--user", user_id, "--json").stdout)
    retracted = run("retract", key, "--user", user_id, "--reason", "no fixed target")
    audit = json.loads(run("audit", "--user", user_id, "--key", key, "--json").stdout)

    assert [v["version"] for v in history["versions"]] == [1, 2] and history["versions"][0]["surface"] == "cli"
    assert retracted.returncode == 0 and b"retracted" in retracted.stdout
    assert [e["action"] for e in audit] == ["retract", "update", "store"]
    assert run("retrieve", key, "--user", user_id).stdout == b"canary \x00 releases\n"
    assert json.loads(run("list", "--user", user_id, "--json").stdout) == []


def test_export_and_import_round_trip_byte_for_byte(user_id: str, other_user_id: str, tmp_path: Path) -> None:
    data = b"\x00 exact \r\n bytes \xe2\x9c\x85\n"
    key = run("store", "--user", user_id, stdin=data).stdout.decode().strip()
    out = tmp_path / "export.jsonl"

    assert run("export", "--user", user_id, "--out", str(out)).returncode == 0
    imported = run("import", str(out), "--user", other_user_id, "--json")
    assert imported.returncode == 0 and json.loads(imported.stdout)["keys"] == [key]
    assert run("retrieve", key, "--user", other_user_id).stdout == data
    again = run("export", "--user", other_user_id).stdout.decode().splitlines()
    assert again[1:] == out.read_text(encoding="utf-8").splitlines()[1:]
    assert run("import", str(out), "--user", other_user_id).returncode == 2  # the keys exist now


def test_history_of_another_users_key_exits_1(user_id: str, other_user_id: str) -> None:
    key = run("store", "--user", user_id, stdin=b"mine").stdout.decode().strip()
    assert run("history", key, "--user", other_user_id).returncode == 1


def test_retrieve_an_earlier_version_and_list_what_held_then(user_id: str) -> None:
    key = run("store", "--user", user_id, "-d", "home city", "-t", "user_fact", stdin=b"Lyon\x00").stdout.decode()
    key = key.strip()
    held = json.loads(run("show", key, "--user", user_id, "--json").stdout)["valid_from"]
    run("update", key, "--user", user_id, stdin=b"Paris")
    newer = run("store", "--user", user_id, "-d", "home city", "-t", "user_fact", stdin=b"Rome").stdout.decode()

    assert run("retrieve", key, "--user", user_id, "--version", "1").stdout == b"Lyon\x00"
    then = json.loads(run("list", "--user", user_id, "--as-of", held, "--json").stdout)
    now = json.loads(run("list", "--user", user_id, "--json").stdout)
    assert [m["memory_key"] for m in then] == [key]
    assert [m["memory_key"] for m in now] == [newer.strip()]
