"""MCP bearer tokens: one token, one user, only the hash stored; create / list / revoke / verify; CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest

from agent_memory import MemoryStore
from agent_memory.auth import StoreTokenVerifier, TokenManager, TokenNotFound


@pytest.fixture
def tokens(store: MemoryStore) -> TokenManager:
    return TokenManager(store.db)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_memory.cli", *args], capture_output=True, text=True, env=dict(os.environ),
        timeout=120,
    )  # fmt: skip


async def test_created_token_verifies_as_its_user(tokens: TokenManager, user_id: str) -> None:
    created = await tokens.create(user_id, name="laptop")
    assert created.token.startswith("amt_") and len(created.token) >= 40
    assert await tokens.verify(created.token) == user_id
    assert created.info.user_id == user_id and created.info.status == "active"


async def test_only_the_sha256_of_the_token_is_stored(tokens: TokenManager, store: MemoryStore, user_id: str) -> None:
    created = await tokens.create(user_id)
    row = await store.db.pool.fetchrow("SELECT * FROM agent_memory_mcp_tokens WHERE id = $1", created.info.id)
    assert row is not None
    assert row["token_sha256"] == hashlib.sha256(created.token.encode()).hexdigest()
    assert created.token not in json.dumps({k: str(v) for k, v in dict(row).items()})


async def test_unknown_and_malformed_tokens_do_not_verify(tokens: TokenManager, user_id: str) -> None:
    created = await tokens.create(user_id)
    for bad in ["", "amt_", created.token + "x", created.token[:-1], "Bearer " + created.token, "x" * 5000]:
        assert await tokens.verify(bad) is None


async def test_revoked_token_stops_verifying(tokens: TokenManager, user_id: str) -> None:
    created = await tokens.create(user_id)
    revoked = await tokens.revoke(created.info.id)
    assert revoked.status == "revoked"
    assert await tokens.verify(created.token) is None


async def test_revoke_by_prefix_or_full_token(tokens: TokenManager, user_id: str) -> None:
    a = await tokens.create(user_id)
    b = await tokens.create(user_id)
    assert (await tokens.revoke(a.token[:12])).id == a.info.id
    assert (await tokens.revoke(b.token)).id == b.info.id
    assert await tokens.verify(a.token) is None and await tokens.verify(b.token) is None


async def test_revoke_refuses_short_or_unknown_prefixes(tokens: TokenManager, user_id: str) -> None:
    created = await tokens.create(user_id)
    with pytest.raises(TokenNotFound, match="at least 8 characters"):
        await tokens.revoke(created.token[:5])
    with pytest.raises(TokenNotFound):
        await tokens.revoke("tok_000000000000")
    assert await tokens.verify(created.token) == user_id


async def test_revoke_can_be_restricted_to_a_user(tokens: TokenManager, user_id: str, other_user_id: str) -> None:
    theirs = await tokens.create(other_user_id)
    with pytest.raises(TokenNotFound):
        await tokens.revoke(theirs.info.id, user_id=user_id)
    assert await tokens.verify(theirs.token) == other_user_id


async def test_expired_token_does_not_verify(tokens: TokenManager, store: MemoryStore, user_id: str) -> None:
    created = await tokens.create(user_id, expires_in=timedelta(hours=1))
    assert await tokens.verify(created.token) == user_id
    await store.db.pool.execute(
        "UPDATE agent_memory_mcp_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", created.info.id
    )
    assert await tokens.verify(created.token) is None
    assert (await tokens.list(user_id))[0].status == "expired"


async def test_list_hides_revoked_unless_asked(tokens: TokenManager, user_id: str) -> None:
    keep = await tokens.create(user_id, name="keep")
    drop = await tokens.create(user_id, name="drop")
    await tokens.revoke(drop.info.id)
    assert [t.id for t in await tokens.list(user_id)] == [keep.info.id]
    assert {t.id for t in await tokens.list(user_id, include_revoked=True)} == {keep.info.id, drop.info.id}


async def test_deleting_the_user_deletes_their_tokens(tokens: TokenManager, store: MemoryStore, user_id: str) -> None:
    created = await tokens.create(user_id)
    await store.forget_user(user_id)
    assert await tokens.verify(created.token) is None


async def test_verifier_gives_the_sdk_an_access_token_with_the_user_as_subject(
    tokens: TokenManager, user_id: str
) -> None:
    created = await tokens.create(user_id, expires_in=timedelta(days=1))
    access = await StoreTokenVerifier(tokens).verify_token(created.token)
    assert access is not None
    assert (access.subject, access.client_id, access.scopes) == (user_id, created.info.id, ["memory"])
    assert access.expires_at is not None
    assert await StoreTokenVerifier(tokens).verify_token("amt_nope") is None


@pytest.mark.usefixtures("database_url")
def test_cli_token_create_list_revoke(user_id: str) -> None:
    created = cli("token", "create", "--user", user_id, "--name", "ci", "--json")
    assert created.returncode == 0, created.stderr
    info = json.loads(created.stdout)
    assert info["token"].startswith("amt_") and info["user_id"] == user_id

    listed = cli("token", "list", "--user", user_id, "--json")
    assert [t["id"] for t in json.loads(listed.stdout)] == [info["id"]]
    assert info["token"] not in listed.stdout

    revoked = cli("token", "revoke", info["token"][:12])
    assert revoked.returncode == 0, revoked.stderr
    assert f"revoked {info['id']}" in revoked.stdout
    assert cli("token", "revoke", "tok_000000000000").returncode == 1


@pytest.mark.usefixtures("database_url")
def test_cli_token_create_prints_the_token_once_in_text_mode(user_id: str) -> None:
    created = cli("token", "create", "--user", user_id)
    assert created.returncode == 0, created.stderr
    first_line = created.stdout.splitlines()[0]
    assert first_line.startswith("amt_") and "shown only this once" in created.stdout


@pytest.mark.usefixtures("database_url")
def test_cli_rejects_bad_expiry_and_mixing_user_with_http(user_id: str) -> None:
    assert cli("token", "create", "--user", user_id, "--expires", "soon").returncode == 2
    mixed = cli("mcp", "--http", "127.0.0.1:1", "--user", user_id)
    assert mixed.returncode == 2 and "--user is for the stdio transport" in mixed.stderr
