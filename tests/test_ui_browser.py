"""The chat UI in a real browser: login, a large command output through the agents, the memory inspector,
thread resume, and isolation between users.

One `agent-memory ui` process and one chromium serve the whole module. The model is the scripted
OpenAI-compatible server: ``brain`` answers like a code agent would (asks for a command, summarises its
output, later retrieves a detail from memory). Screenshots land in test-artifacts/ui/.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator

import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect
from support.scripted_llm import RecordedRequest, Reply, ScriptedLLM
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

from agent_memory import MemoryStore
from agent_memory.config import Settings

pytestmark = [requires_chromium, pytest.mark.asyncio(loop_scope="session")]

ALICE, ALICE_PASSWORD = "alice", "alice-secret-password"
BOB, BOB_PASSWORD = "bob", "bob-secret-password"
BIG_COMMAND = "seq 1 3000 | sed 's/^/inventory row /'"
BIG_OUTPUT = "".join(f"inventory row {i}\n" for i in range(1, 3001))
KEY_RE = re.compile(r"\[MemoryRef: (?P<key>[A-Za-z0-9_.:-]+) - ")
TIMEOUT_MS = 60_000


# ---------------------------------------------------------------------------------------------- the model


def _last_text(request: RecordedRequest) -> str:
    content = request.messages[-1].get("content")
    return content if isinstance(content, str) else json.dumps(content)


def brain(request: RecordedRequest) -> Reply | str:
    """A code agent in miniature, deciding from what it was sent (like a model would)."""
    last = request.messages[-1]
    text = _last_text(request)
    if last.get("role") == "tool":
        return "The last row of the inventory listing is `inventory row 3000`. TERMINATE"
    if "[MemoryRef:" in text and ("Exit code" in text or "stored in memory" in text):
        return "The command printed 3000 inventory rows; the full listing is in memory. TERMINATE"
    if "last row" in text:
        keys = KEY_RE.findall(request.text)
        return Reply.tool_call("retrieve_memory", {"key": keys[-1], "tail": 1})
    if "inventory" in text:
        return f"I'll list the inventory.\n\n```bash\n{BIG_COMMAND}\n```"
    return "I can run commands for you. TERMINATE"


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM([brain] * 200).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def ui_database(database_url: str) -> AsyncIterator[str]:
    async with fresh_database(database_url) as url:
        yield url


@pytest.fixture(scope="module")
async def ui_store(ui_database: str) -> AsyncIterator[MemoryStore]:
    store = await MemoryStore.open(ui_database, settings=Settings(database_url=ui_database))
    yield store
    await store.close()


@pytest.fixture(scope="module")
def app(
    ui_database: str, ui_store: MemoryStore, llm: ScriptedLLM, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    home = tmp_path_factory.mktemp("ui-home")
    env = ui_env(
        ui_database, home, OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key", AGENT_MEMORY_MODEL="gpt-4o"
    )
    add_user(ALICE, ALICE_PASSWORD, env)
    add_user(BOB, BOB_PASSWORD, env)
    with running_ui(env, ARTIFACTS / "app.log") as base:
        yield base


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        await b.close()


@pytest.fixture(scope="module")
async def alice(browser: Browser, app: str) -> AsyncIterator[Page]:
    """Alice's browser tab, logged in (cookies shared by the tabs of her context)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    await login(page, app, ALICE, ALICE_PASSWORD)
    await expect(page.get_by_placeholder("Type your message here...")).to_be_visible(timeout=TIMEOUT_MS)
    yield page
    await context.close()


@pytest.fixture(scope="module")
async def bob_context(browser: Browser, app: str) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    await login(page, app, BOB, BOB_PASSWORD)
    await expect(page.get_by_placeholder("Type your message here...")).to_be_visible(timeout=TIMEOUT_MS)
    yield context
    await context.close()


# ---------------------------------------------------------------------------------------------- tests


async def test_a_wrong_password_is_refused(browser: Browser, app: str) -> None:
    context = await browser.new_context()
    page = await context.new_page()
    await login(page, app, ALICE, "not-the-password")
    await expect(page.get_by_text("Unable to sign in")).to_be_visible(timeout=TIMEOUT_MS)
    assert page.url.endswith("/login")
    await screenshot(page, "01-wrong-password")
    response = await context.request.get(app + "/memory-api/memories")
    assert response.status == 401
    await context.close()


async def test_the_inspector_lists_searches_opens_and_deletes_only_the_users_memories(
    alice: Page, app: str, ui_store: MemoryStore
) -> None:
    kept = await ui_store.store("deploy checklist: rotate the TLS certificate\n", user_id=ALICE,
                                description="deploy checklist", memory_type="note")  # fmt: skip
    doomed = await ui_store.store("scratch notes\n", user_id=ALICE, description="scratch notes")
    foreign = await ui_store.store("bob's private note\n", user_id=BOB, description="bob private")
    page = await alice.context.new_page()
    await page.goto(app + "/memories")
    rows = page.get_by_test_id("memory-row")
    await expect(rows.filter(has_text=kept)).to_be_visible(timeout=TIMEOUT_MS)
    await expect(rows.filter(has_text=foreign)).to_have_count(0)

    await page.get_by_test_id("search-input").fill("TLS certificate")
    await page.get_by_test_id("search-button").click()
    await expect(rows.first).to_contain_text(kept, timeout=TIMEOUT_MS)
    await expect(rows.filter(has_text=doomed)).to_have_count(0)

    await rows.filter(has_text=kept).click()
    await expect(page.get_by_test_id("memory-content")).to_have_text(
        "deploy checklist: rotate the TLS certificate\n", timeout=TIMEOUT_MS
    )
    await screenshot(page, "02-inspector")

    await page.get_by_role("button", name="Show all").click()
    page.once("dialog", lambda dialog: dialog.accept())
    await rows.filter(has_text=doomed).get_by_test_id("row-delete").click()
    await expect(rows.filter(has_text=doomed)).to_have_count(0, timeout=TIMEOUT_MS)
    assert [i.memory_key for i in await ui_store.list(user_id=ALICE)].count(doomed) == 0
    await page.close()


async def test_another_users_memory_is_not_found_through_the_api(alice: Page, app: str, ui_store: MemoryStore) -> None:
    foreign = await ui_store.store("bob only\n", user_id=BOB, description="bob only")
    for path in (f"/memory-api/memories/{foreign}", f"/memory-api/memories/{foreign}/content"):
        response = await alice.context.request.get(app + path)
        assert response.status == 404
    response = await alice.context.request.delete(app + f"/memory-api/memories/{foreign}")
    assert response.status == 404
    assert await ui_store.retrieve(foreign, user_id=BOB) == "bob only\n"
