"""What one local process or one user can make the UI do: the UI runs behind an SSO proxy at 127.0.0.5, with
low limits (2 failed logins per account and address, 2 chat sessions per user), and no model.

Every client here names the loopback address it comes from; 127.0.0.1 is just another local process, which
uvicorn on its own would believe about ``X-Forwarded-For``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import pytest
from ui_support import ARTIFACTS, ChatSocket, add_user, from_address, running_ui, ui_env

from agent_memory import MemoryStore

pytestmark = [pytest.mark.asyncio(loop_scope="session")]

PROXY = "127.0.0.5"
USER_HEADER = "X-Forwarded-User"
MAX_FAILURES = 2  # per account and address; 4x that per address and per account over all addresses
NO_MODEL = "No model is configured"  # what a started chat session says first here
REFUSED = "This chat is not started"


@pytest.fixture(scope="module")
def app(ui_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = ui_env(
        ui_database,
        tmp_path_factory.mktemp("ui-home"),
        AGENT_MEMORY_UI_HEADER_AUTH="1",
        AGENT_MEMORY_UI_TRUSTED_PROXIES=PROXY,
        AGENT_MEMORY_UI_LOGIN_MAX_FAILURES=str(MAX_FAILURES),
        AGENT_MEMORY_UI_MAX_SESSIONS_PER_USER="2",
    )
    for name in ("nora", "pia", "quinn", "rosa", "sam", "tess", "vera"):
        add_user(name, f"{name}-secret-password", env)
    with running_ui(env, ARTIFACTS / "app-limits.log") as base:
        yield base


def password_of(name: str) -> dict[str, str]:
    return {"username": name, "password": f"{name}-secret-password"}


# ---------------------------------------------------------------------------------------------- who is asking


async def test_header_login_from_a_local_process_naming_the_proxy_in_x_forwarded_for_is_refused(app: str) -> None:
    async with from_address(app, "127.0.0.1") as local_process:
        claim = {USER_HEADER: "nora", "X-Forwarded-For": PROXY}
        response = await local_process.post("/auth/header", json={}, headers=claim)
        assert response.status_code == 200 and response.json()["success"] is False
        assert not response.cookies
        assert (await local_process.get("/memory-api/memories")).status_code == 401


async def test_header_login_through_the_proxy_logs_the_user_in(app: str) -> None:
    async with from_address(app, PROXY) as proxy:
        response = await proxy.post("/auth/header", json={}, headers={USER_HEADER: "tess", "X-Forwarded-For": "::1"})
        assert response.json()["success"] is True
        assert (await proxy.get("/memory-api/memories")).json()["user"] == "tess"


async def test_the_throttle_counts_the_peer_whatever_x_forwarded_for_it_sends(app: str) -> None:
    async with from_address(app, "127.0.0.1") as local_process:
        for i in range(MAX_FAILURES * 4):  # the address's limit, each guess claiming another address
            guess = {"username": f"made-up-{i}", "password": "x" * 12}
            claimed = {"X-Forwarded-For": f"127.0.0.{20 + i}"}
            assert (await local_process.post("/login", data=guess, headers=claimed)).status_code == 401
        again = await local_process.post("/login", data=password_of("nora"), headers={"X-Forwarded-For": "127.0.0.99"})
    assert again.status_code == 429  # 127.0.0.1 is locked, however it names itself
    async with from_address(app, "127.0.0.20") as claimed_address:
        assert (await claimed_address.post("/login", data=password_of("nora"))).status_code == 200  # not locked


async def test_behind_the_proxy_the_throttle_counts_the_client_the_proxy_names(app: str) -> None:
    async with from_address(app, PROXY) as proxy:
        for i in range(MAX_FAILURES * 4):
            # The proxy appends the address the request came from; what is left of it, the client wrote.
            guess = {"username": f"nobody-{i}", "password": "x" * 12}
            forwarded = {"X-Forwarded-For": f"10.0.0.{i}, 198.51.100.7"}
            assert (await proxy.post("/login", data=guess, headers=forwarded)).status_code == 401
        locked = await proxy.post("/login", data=password_of("nora"), headers={"X-Forwarded-For": "198.51.100.7"})
        other = await proxy.post("/login", data=password_of("nora"), headers={"X-Forwarded-For": "198.51.100.8"})
    assert locked.status_code == 429
    assert other.status_code == 200  # another client behind the same proxy


# ---------------------------------------------------------------------------------------------- chat sessions


@asynccontextmanager
async def logged_in(app: str, name: str) -> AsyncIterator[httpx.AsyncClient]:
    async with from_address(app, "127.0.0.6") as client:
        assert (await client.post("/login", data=password_of(name))).status_code == 200
        yield client


async def chat(client: httpx.AsyncClient) -> tuple[ChatSocket, str]:
    """A new chat session of the client's user, and the first thing it says (started: NO_MODEL here)."""
    socket = ChatSocket(client)
    await socket.open()
    return socket, await socket.message_containing(NO_MODEL, REFUSED)


async def test_a_chat_session_beyond_the_users_limit_is_refused_before_it_builds_a_team(app: str) -> None:
    async with logged_in(app, "pia") as client:
        sessions = [await chat(client) for _ in range(3)]
        for socket, _ in sessions:
            await socket.close()
    assert [NO_MODEL in first for _, first in sessions] == [True, True, False]
    third, refusal = sessions[2]
    assert REFUSED in refusal and "2 chat sessions open" in refusal
    assert not any(NO_MODEL in message for message in third.messages)  # it never got as far as the team


async def test_the_limit_is_per_user(app: str) -> None:
    async with logged_in(app, "quinn") as quinn, logged_in(app, "sam") as sam:
        quinns = [await chat(quinn) for _ in range(2)]
        sams, first = await chat(sam)
        for socket, _ in [*quinns, (sams, first)]:
            await socket.close()
    assert NO_MODEL in first


async def test_closing_a_chat_session_frees_its_place(app: str) -> None:
    async with logged_in(app, "rosa") as client:
        (first, _), (second, _) = await chat(client), await chat(client)
        await first.close()
        third, says = await chat(client)
        for socket in (second, third):
            await socket.close()
    assert NO_MODEL in says


async def test_a_refused_chat_starts_when_its_user_writes_after_a_place_is_free(app: str) -> None:
    async with logged_in(app, "vera") as client:
        (first, _), (second, _) = await chat(client), await chat(client)
        waiting, refusal = await chat(client)
        await first.close()
        await waiting.send("are you there now")
        answer = await waiting.message_containing("Your message was not run", REFUSED)
        for socket in (second, waiting):
            await socket.close()
    assert REFUSED in refusal
    assert NO_MODEL in answer  # the session started (the chat start's notice and the message's answer both say so)


async def test_a_socket_resuming_its_thread_again_and_again_holds_one_place(app: str, ui_store: MemoryStore) -> None:
    # Chainlit replaces a socket's user session on each resume: the chat kept there was lost, and every
    # "connection_successful" took one more place and built one more team, never given back.
    async with logged_in(app, "sam") as client:
        pool = ui_store.db.pool
        owner = await pool.fetchval('SELECT id FROM "User" WHERE identifier = $1', "sam")
        thread_id = str(uuid.uuid4())
        await pool.execute('INSERT INTO "Thread" (id, "userId", name) VALUES ($1, $2, $3)', thread_id, owner, "t")
        resumed = ChatSocket(client)
        await resumed.open(thread_id)
        await resumed.message_containing(NO_MODEL, REFUSED)
        for _ in range(4):
            await resumed.start_again()
        await resumed.send("still one chat?")
        await resumed.message_containing("Your message was not run", REFUSED)
        await resumed.close()
        fresh = [await chat(client) for _ in range(2)]  # the whole limit, now that every socket is closed
        for socket, _ in fresh:
            await socket.close()
    assert [NO_MODEL in first for _, first in fresh] == [True, True]


async def test_closed_sessions_beyond_the_users_limit_are_not_kept_for_a_reconnect(app: str) -> None:
    # Chainlit kept every closed socket's session for an hour: a script opening and closing sockets in a loop
    # grew the UI by ~85 KB a socket. A user's closed sessions are kept up to their chat limit (2 here).
    async with logged_in(app, "tess") as client:
        for _ in range(2):
            kept, _ = await chat(client)
            await kept.close()
        beyond, _ = await chat(client)
        await beyond.close()
        reconnected = ChatSocket(client)
        await reconnected.open(session_id=beyond.session_id)
        first = await reconnected.message_containing(NO_MODEL, REFUSED, timeout_s=20)
        await reconnected.close()
    assert NO_MODEL in first  # a new session started: the closed one was ended, not kept (kept: no new start)
