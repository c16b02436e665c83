"""Crafted requests against the UI's guards: what an attacker sends, and what the UI must answer.

One `agent-memory ui` process (no model) with ``AGENT_MEMORY_UI_ALLOWED_ORIGINS`` set. Revoked sessions stay
revoked however the token is presented (Chainlit reads cookies leniently); the chat socket opens only for
pages of the UI's own or an allowed origin; a session cannot be renewed; disabled uploads and oversized
login bodies are refused before their bodies are sent. The browser test skips without chromium.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import pytest
from playwright.async_api import Browser
from ui_support import ARTIFACTS, add_user, close_context, requires_chromium, running_ui, ui_env

from agent_memory import MemoryStore
from agent_memory.auth import UserAccounts

pytestmark = [pytest.mark.asyncio(loop_scope="session")]

ALLOWED_ORIGIN = "https://chat.example.test"
ANSWER_TIMEOUT_S = 15  # a refusal comes at once; a server that waits for a body never answers
SOCKET = "/ws/socket.io/?EIO=4&transport="
# Cookie pairs before the session cookie that Python's http.cookies rejects or stops at, and a leading
# no-break space (latin-1) that starlette's parser trims; Chainlit's parser reads the token after each.
CRAFTED_PREFIXES = [b"x(y=1; ", b"a b=1; ", b"x=1; y[=2; ", b"\xa0"]


@pytest.fixture(scope="module")
def app(ui_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = ui_env(ui_database, tmp_path_factory.mktemp("ui-home"), AGENT_MEMORY_UI_ALLOWED_ORIGINS=ALLOWED_ORIGIN)
    for name in ("alice", "bob", "mallory", "nina", "oscar"):
        add_user(name, f"{name}-secret-password", env)
    with running_ui(env, ARTIFACTS / "app-guard.log") as base:
        yield base


async def session_token(app: str, name: str) -> str:
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        response = await client.post("/login", data={"username": name, "password": f"{name}-secret-password"})
        assert response.status_code == 200, response.text
        return str(response.cookies["access_token"])


async def logged_out_token(app: str, name: str) -> str:
    """A token of ``name`` that was live, copied before its user logged out."""
    token = await session_token(app, name)
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        assert (await client.post("/logout", headers={"Cookie": f"access_token={token}"})).status_code == 200
    return token


async def user_status(app: str, cookie: bytes) -> int:
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        return (await client.get("/user", headers=[(b"cookie", cookie)])).status_code


async def socket_connect_answer(app: str, headers: list[tuple[bytes, bytes]]) -> str:
    """Open the chat socket over engine.io's polling transport; socket.io's answer to connect ("40..." or "44...")."""
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        opened = await client.get(SOCKET + "polling", headers=headers)
        assert opened.status_code == 200, opened.text
        polling = f"{SOCKET}polling&sid={json.loads(opened.text[1:])['sid']}"
        auth = {"sessionId": str(uuid.uuid4()), "clientType": "webapp", "threadId": None, "userEnv": "{}"}
        await client.post(polling, content="40" + json.dumps(auth), headers=headers)
        return (await client.get(polling, headers=headers)).text


async def first_status(app: str, head: list[str], body_start: bytes = b"") -> int:
    """Send a request's head (and the start of its body, never the rest); the status the server answers with."""
    url = httpx.URL(app)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write("\r\n".join([*head, f"Host: {url.netloc.decode()}", "", ""]).encode() + body_start)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), ANSWER_TIMEOUT_S)
    finally:
        writer.close()
    return int(status_line.split()[1])


def websocket_head(origin: str, token: str) -> list[str]:
    return [
        f"GET {SOCKET}websocket HTTP/1.1",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        f"Origin: {origin}",
        f"Cookie: access_token={token}",
    ]


# ---------------------------------------------------------------------------------------------- revocation


@pytest.mark.parametrize("prefix", CRAFTED_PREFIXES, ids=["paren", "space", "bracket", "nbsp"])
async def test_a_logged_out_token_after_a_crafted_cookie_prefix_is_refused(app: str, prefix: bytes) -> None:
    token = await logged_out_token(app, "alice")
    assert await user_status(app, prefix + f"access_token={token}".encode()) == 401


async def test_a_logged_out_token_split_into_chunked_cookies_is_refused(app: str) -> None:
    token = await logged_out_token(app, "alice")
    assert await user_status(app, f"access_token_0={token[:40]}; access_token_1={token[40:]}".encode()) == 401


async def test_a_password_change_ends_a_session_presented_after_a_crafted_prefix(
    app: str, ui_store: MemoryStore
) -> None:
    token = await session_token(app, "nina")
    await UserAccounts(ui_store.db).add("nina", "nina-secret-password", replace=True)
    assert await user_status(app, f"a b=1; access_token={token}".encode()) == 401


async def test_deleting_a_user_ends_a_session_presented_after_a_crafted_prefix(app: str, ui_store: MemoryStore) -> None:
    token = await session_token(app, "oscar")
    await ui_store.forget_user("oscar")
    assert await user_status(app, f"x(y=1; access_token={token}".encode()) == 401


async def test_the_chat_socket_connects_a_live_session(app: str) -> None:
    token = await session_token(app, "bob")
    assert (await socket_connect_answer(app, [(b"cookie", f"access_token={token}".encode())])).startswith("40")


async def test_the_chat_socket_refuses_a_logged_out_token_after_a_crafted_prefix(app: str) -> None:
    token = await logged_out_token(app, "alice")
    answer = await socket_connect_answer(app, [(b"cookie", f"x(y=1; access_token={token}".encode())])
    assert answer.startswith("44")


async def test_the_chat_socket_refuses_a_revoked_token_that_only_it_reads(app: str) -> None:
    # Chainlit's HTTP routes read the last Cookie header (mallory's live token); the socket skips that
    # header, which is not UTF-8, and reads alice's logged-out token from the first one.
    stale, live = await logged_out_token(app, "alice"), await session_token(app, "mallory")
    headers = [
        (b"cookie", f"access_token={stale}".encode()),
        (b"cookie", f"access_token={live}; x=\xff".encode("latin-1")),
    ]
    assert (await socket_connect_answer(app, headers)).startswith("44")


# ---------------------------------------------------------------------------------------------- origins


@pytest.mark.parametrize("origin", ["http://127.0.0.1:1", "http://localhost", "https://evil.example", "null"])
async def test_the_chat_websocket_refuses_a_page_of_another_origin(app: str, origin: str) -> None:
    assert await first_status(app, websocket_head(origin, await session_token(app, "bob"))) == 403


async def test_socket_polling_refuses_a_page_of_another_origin(app: str) -> None:
    token = await session_token(app, "bob")
    headers = {"Origin": "http://127.0.0.1:1", "Cookie": f"access_token={token}"}
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        assert (await client.get(SOCKET + "polling", headers=headers)).status_code == 403


async def test_the_chat_websocket_opens_for_the_uis_own_origin(app: str) -> None:
    assert await first_status(app, websocket_head(app, await session_token(app, "bob"))) == 101


async def test_the_chat_websocket_opens_for_an_allowed_origin(app: str) -> None:
    assert await first_status(app, websocket_head(ALLOWED_ORIGIN, await session_token(app, "bob"))) == 101


@asynccontextmanager
async def another_site(page_html: str) -> AsyncIterator[str]:
    """A server on another port of the same host (same site as the UI) serving one page; yields its URL."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = page_html.encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


@requires_chromium
async def test_a_page_on_another_port_cannot_use_the_logged_in_users_socket(browser: Browser, app: str) -> None:
    context = await browser.new_context()
    login = await context.request.post(app + "/login", form={"username": "bob", "password": "bob-secret-password"})
    assert login.ok
    socket_url = app.replace("http://", "ws://") + SOCKET + "websocket"
    page_html = f"""<script>
    window.outcome = new Promise(resolve => {{
      const ws = new WebSocket({json.dumps(socket_url)});
      ws.onmessage = e => e.data.startsWith("0")
        ? ws.send('40{{"sessionId": "cswsh", "clientType": "webapp", "threadId": null, "userEnv": "{{}}"}}')
        : resolve(e.data.slice(0, 2));
      ws.onclose = () => resolve("refused");
    }});
    </script>"""
    page = await context.new_page()
    async with another_site(page_html) as url:
        await page.goto(url)
        outcome = await asyncio.wait_for(page.evaluate("window.outcome"), ANSWER_TIMEOUT_S)
    await close_context(context)
    assert outcome == "refused"  # the server answered the page's socket with 403; "40" is a hijacked session


async def test_a_jsonp_polling_handshake_is_refused(app: str) -> None:
    # A page on any site could include it as a script: the user's cookie goes along, and no Origin header.
    token = await session_token(app, "alice")
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        answer = await client.get(
            "/ws/socket.io/", params={"EIO": "4", "transport": "polling", "j": "0"},
            headers={"Cookie": f"access_token={token}"},
        )  # fmt: skip
    assert answer.status_code == 403 and "eio" not in answer.text


# ---------------------------------------------------------------------------------------------- renewal


async def test_a_session_cannot_be_renewed_through_auth_jwt(app: str) -> None:
    token = await session_token(app, "bob")
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        response = await client.post("/auth/jwt", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 404
    assert "access_token" not in response.cookies


# ---------------------------------------------------------------------------------------------- bodies


async def test_an_upload_is_refused_before_its_body_is_sent(app: str) -> None:
    token = await session_token(app, "bob")
    head = [
        "POST /project/file?session_id=any HTTP/1.1",
        f"Cookie: access_token={token}",
        "Content-Type: multipart/form-data; boundary=XX",
        f"Content-Length: {800 * 2**20}",
    ]
    part = b'--XX\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n\r\n'
    assert await first_status(app, head, part + b"A" * 2**16) == 403


async def test_a_login_body_declared_over_the_bound_is_refused_before_it_is_sent(app: str) -> None:
    head = ["POST /login HTTP/1.1", "Content-Type: multipart/form-data; boundary=XX", f"Content-Length: {500 * 2**20}"]
    assert (
        await first_status(app, head, b'--XX\r\nContent-Disposition: form-data; name="f"; filename="a"\r\n\r\n') == 413
    )


async def test_a_login_body_streamed_without_a_length_is_refused_at_the_bound(app: str) -> None:
    head = ["POST /login HTTP/1.1", "Content-Type: multipart/form-data; boundary=XX", "Transfer-Encoding: chunked"]
    part = b'--XX\r\nContent-Disposition: form-data; name="f"; filename="a"\r\n\r\n' + b"A" * 80 * 1024
    assert await first_status(app, head, b"%x\r\n%s\r\n" % (len(part), part)) == 413


@pytest.mark.parametrize(("method", "path"), [("PUT", "/feedback"), ("POST", "/project/threads"),
                                              ("POST", "/project/action"), ("PUT", "/project/element")])  # fmt: skip
async def test_a_json_body_of_hundreds_of_mb_is_refused_unread_without_a_login(
    app: str, method: str, path: str
) -> None:
    # FastAPI parses a route's JSON body before it checks the session: 400 MB took the UI from 134 to 935 MB.
    head = [f"{method} {path} HTTP/1.1", "Content-Type: application/json", f"Content-Length: {400 * 2**20}"]
    assert await first_status(app, head, b'{"feedback": {"comment": "') == 413
