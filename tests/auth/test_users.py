"""UI logins: scrypt password hashes in PostgreSQL, the `agent-memory user` commands, the auth secret."""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from support.databases import fresh_database

from agent_memory import MemoryStore
from agent_memory.auth import AccountExists, UserAccounts, auth_secret, hash_password, verify_password
from agent_memory.config import Settings


def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_memory.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_a_hash_verifies_its_password_and_nothing_else() -> None:
    encoded = hash_password("correct horse battery")
    assert encoded.startswith("scrypt$")
    assert "correct horse" not in encoded
    assert verify_password("correct horse battery", encoded)
    assert not verify_password("correct horse batterY", encoded)
    assert not verify_password("correct horse battery", "not-a-hash")


def test_two_hashes_of_one_password_differ() -> None:
    assert hash_password("same password") != hash_password("same password")


def test_short_passwords_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 8"):
        hash_password("short")


async def test_a_login_accepts_its_password_only(store: MemoryStore, user_id: str) -> None:
    accounts = UserAccounts(store.db)
    await accounts.add(user_id, "alice-password")
    assert await accounts.verify(user_id, "alice-password")
    assert not await accounts.verify(user_id, "alice-passworD")
    assert not await accounts.verify(user_id, "")


async def test_an_unknown_user_is_refused(store: MemoryStore, user_id: str) -> None:
    assert not await UserAccounts(store.db).verify(user_id, "any password at all")


async def test_adding_an_existing_login_needs_replace(store: MemoryStore, user_id: str) -> None:
    accounts = UserAccounts(store.db)
    await accounts.add(user_id, "first-password")
    with pytest.raises(AccountExists):
        await accounts.add(user_id, "second-password")
    assert await accounts.verify(user_id, "first-password")
    await accounts.add(user_id, "second-password", replace=True)
    assert await accounts.verify(user_id, "second-password")
    assert not await accounts.verify(user_id, "first-password")


async def test_the_hash_never_lands_in_the_user_metadata_chainlit_sends_to_browsers(
    store: MemoryStore, user_id: str
) -> None:
    await UserAccounts(store.db).add(user_id, "alice-password")
    metadata = await store.db.pool.fetchval('SELECT metadata FROM "User" WHERE identifier = $1', user_id)
    assert "scrypt" not in json.dumps(metadata)


async def test_removing_a_login_keeps_the_users_memories(store: MemoryStore, user_id: str) -> None:
    accounts = UserAccounts(store.db)
    await accounts.add(user_id, "alice-password")
    key = await store.store("kept", user_id=user_id)
    assert await accounts.remove_login(user_id)
    assert not await accounts.verify(user_id, "alice-password")
    assert await store.retrieve(key, user_id=user_id) == "kept"
    assert not await accounts.remove_login(user_id)


async def test_forgetting_a_user_removes_the_login(store: MemoryStore, user_id: str) -> None:
    accounts = UserAccounts(store.db)
    await accounts.add(user_id, "alice-password")
    await store.forget_user(user_id)
    assert not await accounts.verify(user_id, "alice-password")


def test_the_auth_secret_is_created_once_private_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAINLIT_AUTH_SECRET", raising=False)
    settings = Settings(home=tmp_path / "home")
    first = auth_secret(settings)
    path = tmp_path / "home" / "chainlit_auth_secret"
    assert len(first) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert auth_secret(settings) == first


def test_a_given_auth_secret_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAINLIT_AUTH_SECRET", "given-secret-value")
    assert auth_secret(Settings(home=tmp_path)) == "given-secret-value"
    assert not (tmp_path / "chainlit_auth_secret").exists()


# ---------------------------------------------------------------------------------------------- CLI


@pytest.mark.usefixtures("database_url")
def test_user_add_list_delete_from_the_command_line(user_id: str) -> None:
    added = run("user", "add", user_id, "--password-stdin", stdin="a good password\n")
    assert added.returncode == 0, added.stderr
    again = run("user", "add", user_id, "--password-stdin", stdin="a good password\n")
    assert again.returncode == 2
    assert "--replace" in again.stderr
    listed = json.loads(run("user", "list", "--json").stdout)
    assert {"identifier": user_id, "has_login": True} in [
        {"identifier": u["identifier"], "has_login": u["has_login"]} for u in listed
    ]
    assert run("user", "delete", user_id).returncode == 0
    assert run("user", "delete", user_id).returncode == 1


@pytest.mark.usefixtures("database_url")
def test_user_add_without_a_terminal_asks_for_password_stdin(user_id: str) -> None:
    result = run("user", "add", user_id, stdin="")
    assert result.returncode == 2
    assert "--password-stdin" in result.stderr


class Terminal:
    """`agent-memory ARGS` on a pseudo-terminal of its own (no controlling terminal, so getpass uses it)."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_memory.cli", *args],
            stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout_s: float = 60.0) -> None:
        """Read until ``text`` appears (a prompt must be on screen before its answer is typed: getpass
        flushes what was typed ahead)."""
        while text not in self.seen:
            ready, _, _ = select.select([self.master], [], [], timeout_s)
            if not ready:
                raise AssertionError(f"{text!r} never appeared; the terminal shows {self.seen!r}")
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the process ended and the terminal closed
                chunk = b""
            if not chunk:
                raise AssertionError(f"{text!r} never appeared; the terminal shows {self.seen!r}")
            self.seen += chunk.decode(errors="replace")
        self.seen = self.seen[self.seen.index(text) + len(text) :]

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def close(self) -> int:
        code = self.proc.wait(timeout=60)
        os.close(self.master)
        return code


@pytest.mark.usefixtures("database_url")
def test_user_add_on_a_terminal_asks_again_after_a_short_or_mistyped_password(user_id: str) -> None:
    terminal = Terminal("user", "add", user_id)
    terminal.expect("(at least 8 characters): ")
    terminal.type("short")
    terminal.expect("password is too short")
    terminal.expect("(at least 8 characters): ")
    terminal.type("a good password")
    terminal.expect("Repeat password: ")
    terminal.type("a good passwrod")
    terminal.expect("the passwords differ; try again")
    terminal.expect("(at least 8 characters): ")
    terminal.type("a good password")
    terminal.expect("Repeat password: ")
    terminal.type("a good password")
    terminal.expect(f"user {user_id} can now log in")

    assert terminal.close() == 0


@pytest.fixture
async def empty_database_url(database_url: str) -> AsyncIterator[str]:
    """A fresh database on the test server (no users at all)."""
    async with fresh_database(database_url, "am_empty") as url:
        yield url


def test_ui_without_any_login_says_exactly_what_to_run(empty_database_url: str) -> None:
    result = run("ui", "--port", "1", env={"AGENT_MEMORY_DATABASE_URL": empty_database_url})
    assert result.returncode == 2
    assert "agent-memory user add" in result.stderr


def test_ui_with_header_auth_switched_off_still_needs_a_login(empty_database_url: str) -> None:
    # "0" is off, as in the UI itself: without logins nobody could sign in, so the command says what to run.
    env = {"AGENT_MEMORY_DATABASE_URL": empty_database_url, "AGENT_MEMORY_UI_HEADER_AUTH": "0"}
    result = run("ui", "--port", "1", env=env)
    assert result.returncode == 2
    assert "agent-memory user add" in result.stderr


@pytest.mark.parametrize(
    ("env", "configured"),
    [
        ({}, False),
        ({"OPENAI_API_KEY": "sk-test"}, True),
        ({"AGENT_MEMORY_MODEL_CONFIG": '{"provider": "x.Client", "config": {}}'}, True),
        ({"AGENT_MEMORY_MODEL_FAMILY": "llama", "AGENT_MEMORY_MODEL_VISION": "maybe"}, True),  # wrong: the chat says
    ],
)
def test_ui_notes_a_missing_model_as_the_app_judges_it(
    env: dict[str, str], configured: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_memory.cli._ui import _model_configured

    for name in [n for n in os.environ if n.startswith(("OPENAI_", "AGENT_MEMORY_MODEL"))]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _model_configured() is configured
