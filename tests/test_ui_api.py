"""The UI without any model configured, and behind an SSO proxy (trusted header login).

One `agent-memory ui` process with no OPENAI_* variables and ``AGENT_MEMORY_UI_HEADER_AUTH=1``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from playwright.async_api import Browser, async_playwright, expect
from test_ui_support import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    add_user,
    fresh_database,
    login,
    requires_chromium,
    running_ui,
    screenshot,
    ui_env,
)

pytestmark = [requires_chromium, pytest.mark.asyncio(loop_scope="session")]

TIMEOUT_MS = 60_000
PROXY_HEADER = "X-Forwarded-User"


@pytest.fixture(scope="module")
async def ui_database(database_url: str) -> AsyncIterator[str]:
    async with fresh_database(database_url) as url:
        yield url


@pytest.fixture(scope="module")
def app(ui_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = ui_env(
        ui_database,
        tmp_path_factory.mktemp("ui-home"),
        AGENT_MEMORY_UI_HEADER_AUTH="1",
        AGENT_MEMORY_UI_TRUSTED_HEADER=PROXY_HEADER,
    )
    add_user("carol", "carol-secret-password", env)
    with running_ui(env, ARTIFACTS / "app-no-model.log") as base:
        yield base


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        await b.close()


async def test_without_a_model_the_chat_says_what_to_set(browser: Browser, app: str) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    await login(page, app, "carol", "carol-secret-password")
    await expect(page.get_by_text("No model is configured")).to_be_visible(timeout=TIMEOUT_MS)
    await expect(page.get_by_text("OPENAI_API_KEY").first).to_be_visible()
    await screenshot(page, "10-no-model")
    await context.close()


async def test_a_trusted_proxy_header_logs_the_user_in(browser: Browser, app: str) -> None:
    context = await browser.new_context(extra_http_headers={PROXY_HEADER: "dave"})
    page = await context.new_page()
    await page.goto(app + "/")
    await expect(page.get_by_placeholder("Type your message here...")).to_be_visible(timeout=TIMEOUT_MS)
    who = await context.request.get(app + "/memory-api/memories")
    assert who.status == 200
    assert (await who.json())["user"] == "dave"
    await context.close()
