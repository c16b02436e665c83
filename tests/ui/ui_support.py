"""Shared pieces of the UI tests (no tests here): a fresh database, the real `agent-memory ui` process, clients
from other loopback addresses, and chat sessions opened without a browser (:class:`ChatSocket`).

The app runs exactly as a user starts it (``agent-memory ui --port N``) against its own database on the
test server, with ``OPENAI_BASE_URL`` pointing at the scripted OpenAI-compatible server. Playwright drives
Debian's chromium (``/usr/bin/chromium``); without it the browser tests are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.servers import free_port, running_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"

requires_chromium = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium; .ci/run does it), "
    "driven by Playwright (pip install -e '.[dev]')",
)


def cli(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_memory.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def add_user(name: str, password: str, env: dict[str, str]) -> None:
    result = cli("user", "add", name, "--password-stdin", env=env, stdin=password + "\n")
    assert result.returncode == 0, result.stderr


@contextmanager
def running_ui(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """``agent-memory ui`` on a free port; yields its base URL once ``/health`` answers."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "agent_memory.cli", "ui", "--port", str(port)]

    def healthy() -> bool:
        with urllib.request.urlopen(base + "/health", timeout=2) as response:
            return bool(response.status == 200)

    with running_server(argv, env, log_path, healthy, name="agent-memory ui", timeout_s=90):
        yield base


def ui_env(database_url: str, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_MEMORY_MODEL"))}
    env.pop("CHAINLIT_AUTH_SECRET", None)
    # CI=true as on CI servers (and here too): it must not switch on Chainlit's CI mode, whose fake OpenAI key
    # would give the no-model app a model and replace the key of the app that has one.
    env.update({"AGENT_MEMORY_DATABASE_URL": database_url, "AGENT_MEMORY_HOME": str(home), "CI": "true", **extra})
    return env


async def login(page: Any, base: str, name: str, password: str, *, navigate: bool = True) -> None:
    """Log in with the password form (``navigate=False``: the page is already on ``/login``)."""
    if navigate:
        await page.goto(base + "/login")
    await page.fill("#email", name)
    await page.fill("#password", password)
    await page.click("button[type=submit]")


async def chat_ready(page: Any, timeout_ms: int = 60_000) -> None:
    """Wait until the chat session's socket is up: a message typed before that, Chainlit drops.

    The composer is editable as soon as the page renders; the app's commands (``Memories``, ``Search``)
    arrive over the session's socket at chat start, so once they show, the session is listening.
    """
    from playwright.async_api import expect

    await expect(page.locator("#command-Memories")).to_be_visible(timeout=timeout_ms)


async def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path))
    return path


async def close_context(context: Any) -> None:
    """Leave the app's pages (closing its websockets) before closing the context.

    Headless chromium sometimes never finishes closing a context whose page still holds the Chainlit
    socket; the browser is closed at the end of the module anyway, so a stuck close is not waited for.
    """
    for page in context.pages:
        with contextlib.suppress(Exception):
            await page.goto("about:blank")
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(context.close(), timeout=15)


def from_address(app: str, address: str) -> httpx.AsyncClient:
    """A client whose requests come from another loopback address (127.0.0.0/8 is all local on Linux)."""
    return httpx.AsyncClient(base_url=app, timeout=30, transport=httpx.AsyncHTTPTransport(local_address=address))


class ChatSocket:
    """One chat session as any script holding a user's cookie can open it: Socket.IO over plain HTTP requests
    (Engine.IO long polling), no browser.

    :meth:`close` returns once the server has handled the disconnect (it runs its handlers, ``on_chat_end``
    included, before answering), so what the close frees is free when it returns.
    """

    PATH = "/ws/socket.io/"

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.params = {"EIO": "4", "transport": "polling"}
        self.messages: list[str] = []  # the chat messages received so far, in order
        self.session_id = ""  # Chainlit's session id, set by open
        self._read = 0  # how many of them message_containing has passed

    async def open(self, thread_id: str | None = None, session_id: str | None = None) -> None:
        """Connect and start the chat session (Chainlit then runs ``on_chat_start``, or ``on_chat_resume`` for
        ``thread_id``); ``session_id``: reconnect as that session, as Chainlit's client does."""
        handshake = await self.client.get(self.PATH, params={"EIO": "4", "transport": "polling"})
        assert handshake.text.startswith("0"), handshake.text
        self.params["sid"] = json.loads(handshake.text[1:])["sid"]
        self.session_id = session_id or str(uuid.uuid4())
        auth = {"sessionId": self.session_id, "clientType": "webapp", "threadId": thread_id, "userEnv": "{}"}
        await self._send("40" + json.dumps(auth))
        answer = await self._receive()
        assert answer and answer[0].startswith("40{"), answer  # "44...": the connection was refused
        await self.start_again()

    async def start_again(self) -> None:
        """Ask the server to (re)start this socket's chat, as Chainlit's client does after each (re)connect."""
        await self._send('42["connection_successful"]')

    async def send(self, text: str) -> None:
        """Send ``text`` as the user's chat message."""
        message = {"id": str(uuid.uuid4()), "createdAt": "2026-01-01T00:00:00Z", "output": text, "type": "user_message"}
        await self._send("42" + json.dumps(["client_message", {"message": message, "fileReferences": []}]))

    async def message_containing(self, *texts: str, timeout_s: float = 60) -> str:
        """The next chat message that contains one of ``texts`` (received already, or still to come)."""
        async with asyncio.timeout(timeout_s):
            while True:
                while self._read < len(self.messages):
                    self._read += 1
                    if any(text in self.messages[self._read - 1] for text in texts):
                        return self.messages[self._read - 1]
                for packet in await self._receive():
                    if packet.startswith("42"):
                        event, *args = json.loads(packet[2:])
                        if event == "new_message":
                            self.messages.append(str(args[0].get("output", "")))

    async def close(self) -> None:
        await self._send("1")

    async def _send(self, packet: str) -> None:
        sent = await self.client.post(self.PATH, params=self.params, content=packet.encode())
        assert sent.status_code == 200, sent.text

    async def _receive(self) -> list[str]:
        """The packets the server has queued (waits for at least one)."""
        polled = await self.client.get(self.PATH, params=self.params)
        assert polled.status_code == 200, polled.text
        packets = polled.text.split("\x1e")
        if "2" in packets:  # the server's ping: unanswered, it ends the session
            await self._send("3")
        return [p for p in packets if p not in ("2", "6")]
