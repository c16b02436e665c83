"""Shared pieces of the browser tests (no tests here): a fresh database, the real `agent-memory ui` process.

The app runs exactly as a user starts it (``agent-memory ui --port N``) against its own database on the
test server, with ``OPENAI_BASE_URL`` pointing at the scripted OpenAI-compatible server. Playwright drives
Debian's chromium (``/usr/bin/chromium``); without it the browser tests are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
