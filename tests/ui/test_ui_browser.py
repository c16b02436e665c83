"""The chat UI in a real browser: login, a large command output through the agents, the memory inspector,
thread resume, and isolation between users.

One `agent-memory ui` process and one chromium serve the whole module. The model is the scripted
OpenAI-compatible server: ``brain`` answers like a code agent would (asks for a command, summarises its
output, later retrieves a detail from memory). Screenshots land in test-artifacts/ui/.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page, expect
from support.scripted_llm import RecordedRequest, Reply, ScriptedLLM
from ui_support import (
    ARTIFACTS,
    add_user,
    chat_ready,
    close_context,
    login,
    requires_chromium,
    running_ui,
    screenshot,
    ui_env,
)

from agent_memory import MemoryStore

pytestmark = [requires_chromium, pytest.mark.asyncio(loop_scope="session")]

ALICE, ALICE_PASSWORD = "alice", "alice-secret-password"
BOB, BOB_PASSWORD = "bob", "bob-secret-password"
BIG_COMMAND = "seq 1 3000 | sed 's/^/inventory row /'"
BIG_OUTPUT = "".join(f"inventory row {i}\n" for i in range(1, 3001))
SLOW_COMMAND = "sleep 937"
# Prints three lines, then waits for the test to create `go` in its work directory (at most 120 s).
BUILD_COMMAND = (
    'for part in 1 2 3; do echo "building part $part of 3"; done\n'
    "for i in $(seq 1200); do [ -e go ] && break; sleep 0.1; done\necho build finished"
)
KEY_RE = re.compile(r"\[MemoryRef: (?P<key>[A-Za-z0-9_.:-]+) - ")
TIMEOUT_MS = 60_000


# ---------------------------------------------------------------------------------------------- the model


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def _is_executor_report(text: str) -> bool:
    return text.startswith(("Exit code", "FAILED", "TIMED OUT", "No code blocks", "Code execution"))


def brain(request: RecordedRequest) -> Reply | str:
    """A code agent in miniature, deciding from what it was sent (like a model would)."""
    messages = request.messages
    last = messages[-1]
    if last.get("role") == "tool":
        return "The last row of the inventory listing is `inventory row 3000`. TERMINATE"
    tasks = [_text(m) for m in messages if m.get("role") == "user" and not _is_executor_report(_text(m))]
    task = tasks[-1] if tasks else ""
    if _is_executor_report(_text(last)) and "[MemoryRef:" in _text(last) and "inventory" in task:
        return "The command printed 3000 inventory rows; the full listing is in memory. TERMINATE"
    if "last row" in task:
        keys = KEY_RE.findall(request.text)
        return Reply.tool_call("retrieve_memory", {"key": keys[-1], "tail": 1}) if keys else "No listing. TERMINATE"
    ran = _is_executor_report(_text(last)) and not _text(last).startswith("No code blocks")
    if "build" in task and not ran:
        return f"Building.\n\n```bash\n{BUILD_COMMAND}\n```"
    if "slow job" in task and not ran:
        return f"Running it.\n\n```bash\n{SLOW_COMMAND}\n```"
    if "inventory" in task and not ran:
        return f"I'll list the inventory.\n\n```bash\n{BIG_COMMAND}\n```"
    return "Done. TERMINATE"


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM([brain] * 200).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ui_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-home")


@pytest.fixture(scope="module")
def app(ui_database: str, ui_store: MemoryStore, llm: ScriptedLLM, ui_home: Path) -> Iterator[str]:
    home = ui_home
    env = ui_env(
        ui_database, home, OPENAI_BASE_URL=llm.base_url, OPENAI_API_KEY="test-key", AGENT_MEMORY_MODEL="gpt-4o"
    )
    add_user(ALICE, ALICE_PASSWORD, env)
    add_user(BOB, BOB_PASSWORD, env)
    with running_ui(env, ARTIFACTS / "app.log") as base:
        yield base


@pytest.fixture(scope="module")
async def alice(browser: Browser, app: str) -> AsyncIterator[Page]:
    """Alice's browser tab, logged in (cookies shared by the tabs of her context)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 1000})
    page = await context.new_page()
    await login(page, app, ALICE, ALICE_PASSWORD)
    await chat_ready(page, TIMEOUT_MS)
    yield page
    await close_context(context)


@pytest.fixture(scope="module")
async def bob_context(browser: Browser, app: str) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    await login(page, app, BOB, BOB_PASSWORD)
    await chat_ready(page, TIMEOUT_MS)
    yield context
    await close_context(context)


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
    await close_context(context)


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
    await expect(page.get_by_test_id("status")).to_contain_text("best first", timeout=TIMEOUT_MS)
    await expect(rows.first).to_contain_text(kept)

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


# ---------------------------------------------------------------------------------------------- chat


class AliceThread:
    """What the chat tests learn as they go (they run in file order and share Alice's tab)."""

    thread_id: str = ""
    key: str = ""


async def send(page: Page, text: str) -> None:
    box = page.locator("#chat-input")
    await box.fill(text)
    await box.press("Enter")


async def test_a_large_command_output_shows_as_an_executor_step_with_a_memory_ref(
    alice: Page, app: str, llm: ScriptedLLM, ui_store: MemoryStore
) -> None:
    await send(alice, "please list the inventory")
    await expect(alice.get_by_text("The command printed 3000 inventory rows")).to_be_visible(timeout=TIMEOUT_MS)
    # Chainlit moves the page to /thread/<id> once the thread exists, which may be after the answer shows.
    await expect(alice).to_have_url(re.compile(r"/thread/[0-9a-f-]+$"), timeout=TIMEOUT_MS)
    match = re.search(r"/thread/([0-9a-f-]+)", alice.url)
    assert match, alice.url
    AliceThread.thread_id = match.group(1)

    outputs = await ui_store.list(user_id=ALICE, memory_type="command_output", thread_id=AliceThread.thread_id)
    assert len(outputs) == 1
    AliceThread.key = outputs[0].memory_key
    assert await ui_store.retrieve(AliceThread.key, user_id=ALICE) == BIG_OUTPUT

    step_text = alice.locator("body")
    await expect(step_text).to_contain_text(f"[MemoryRef: {AliceThread.key} - ", timeout=TIMEOUT_MS)
    await expect(step_text).to_contain_text("inventory row 1")  # the excerpt
    await expect(alice.get_by_text(f"memory: stored {AliceThread.key}")).to_be_visible()
    # The page and the model got the placeholder + excerpt, never the middle of the output.
    assert "inventory row 1500" not in await alice.content()
    assert not [r for r in llm.requests if "inventory row 1500" in r.text]
    await screenshot(alice, "03-executor-step")


async def test_the_model_is_called_with_the_key_the_user_configured(llm: ScriptedLLM) -> None:
    # The app runs with CI=true (ui_env); in Chainlit's CI mode its CLI would swap OPENAI_API_KEY for a fake key.
    sent = {r.headers.get("Authorization") or r.headers.get("authorization") for r in llm.requests}
    assert sent == {"Bearer test-key"}


async def test_open_full_output_fetches_the_exact_output_from_the_store(alice: Page, app: str) -> None:
    async with alice.context.expect_page() as opened:
        await alice.get_by_role("link", name="Open full output").first.click()
    page = await opened.value
    await page.wait_for_load_state()
    assert page.url.endswith(f"/memory-api/memories/{AliceThread.key}/content")
    response = await alice.context.request.get(page.url)
    assert await response.text() == BIG_OUTPUT
    await page.close()


async def test_the_stored_output_is_in_the_memory_inspector(alice: Page, app: str) -> None:
    page = await alice.context.new_page()
    await page.goto(f"{app}/memories?thread={AliceThread.thread_id}")
    row = page.get_by_test_id("memory-row").filter(has_text=AliceThread.key)
    await expect(row).to_be_visible(timeout=TIMEOUT_MS)
    await expect(row).to_contain_text("command_output")
    await expect(page.get_by_test_id("thread-stats")).to_contain_text("kept")
    await row.click()
    await expect(page.get_by_test_id("memory-content")).to_contain_text("inventory row 3000", timeout=TIMEOUT_MS)
    await screenshot(page, "04-inspector-thread")
    await page.close()


async def test_the_memories_command_shows_tokens_kept_out_of_the_context(alice: Page) -> None:
    await alice.locator("#command-Memories").click()  # shows them at once: no message to type and send
    await expect(alice.get_by_text("memory kept")).to_be_visible(timeout=TIMEOUT_MS)
    await expect(alice.get_by_text(AliceThread.key).last).to_be_visible()


async def test_a_resumed_thread_continues_with_its_placeholders(alice: Page, app: str, llm: ScriptedLLM) -> None:
    await alice.goto(f"{app}/thread/{AliceThread.thread_id}")
    await expect(alice.get_by_text("The command printed 3000 inventory rows")).to_be_visible(timeout=TIMEOUT_MS)
    before = len(llm.requests)
    await send(alice, "what is the last row of that listing?")
    await expect(alice.get_by_text("The last row of the inventory listing is")).to_be_visible(timeout=TIMEOUT_MS)
    asked = llm.requests[before]
    # The rebuilt MemoryContext still holds the placeholder (the model found the key in its context) ...
    assert f"[MemoryRef: {AliceThread.key} - " in asked.text
    assert "please list the inventory" in asked.text
    # ... and still not the raw output.
    assert "inventory row 1500" not in asked.text
    await expect(alice.get_by_text("memory: recalled with retrieve_memory").last).to_be_visible()
    await screenshot(alice, "05-resumed-thread")


async def test_stop_cancels_the_run_and_kills_the_command(alice: Page) -> None:
    import psutil

    def sleepers() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            cmdline = proc.info.get("cmdline") or []
            if any(SLOW_COMMAND in part for part in cmdline) or cmdline[-2:] == SLOW_COMMAND.split():
                found.append(proc)
        return found

    log_before = (ARTIFACTS / "app.log").read_text(errors="replace")
    await send(alice, "please run the slow job")
    await expect(alice.locator("#stop-button")).to_be_visible(timeout=TIMEOUT_MS)
    await expect(alice.get_by_text(SLOW_COMMAND).last).to_be_visible(timeout=TIMEOUT_MS)
    await alice.locator("#stop-button").click()
    await expect(alice.get_by_text("Task manually stopped.")).to_be_visible(timeout=TIMEOUT_MS)
    await expect(alice.locator("#stop-button")).to_have_count(0, timeout=TIMEOUT_MS)
    for _ in range(100):  # process state of another process: poll (the kill is immediate, the reap is not)
        if not sleepers():
            break
        await alice.wait_for_timeout(100)
    assert sleepers() == []
    logged = (ARTIFACTS / "app.log").read_text(errors="replace")[len(log_before) :]
    assert "Traceback" not in logged and "CancelledError" not in logged, logged[-2000:]


async def test_a_running_command_shows_its_output_live_then_its_result(alice: Page, ui_home: Path) -> None:
    await send(alice, "please run the build")
    running = alice.get_by_text(re.compile(r"running bash · [0-9.]+ s"))
    await expect(running).to_be_visible(timeout=TIMEOUT_MS)
    await expect(alice.get_by_text("building part 3 of 3").last).to_be_visible(timeout=TIMEOUT_MS)
    await expect(alice.get_by_text("bytes of output so far")).to_be_visible()
    await screenshot(alice, "08-running-step")
    for work_dir in (ui_home / "work").glob("*/*"):  # the thread directories (only alice runs code)
        (work_dir / "go").touch()  # the command ends only after its step was seen running

    await expect(alice.get_by_text(re.compile(r"ran bash · exit 0 in [0-9.]+s")).last).to_be_visible(timeout=TIMEOUT_MS)
    await expect(alice.get_by_text("build finished").last).to_be_visible()
    await expect(running).to_have_count(0)


async def test_on_a_phone_sized_screen_nothing_overflows_sideways(browser: Browser, app: str) -> None:
    context = await browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = await context.new_page()
    await login(page, app, ALICE, ALICE_PASSWORD)
    await chat_ready(page, TIMEOUT_MS)
    await page.goto(f"{app}/thread/{AliceThread.thread_id}")
    await expect(page.get_by_text("The command printed 3000 inventory rows")).to_be_visible(timeout=TIMEOUT_MS)
    chat_width = await page.evaluate("document.documentElement.scrollWidth")
    await screenshot(page, "09-phone-chat")
    await page.goto(f"{app}/memories")
    await expect(page.get_by_test_id("memory-row").first).to_be_visible(timeout=TIMEOUT_MS)
    inspector_width = await page.evaluate("document.documentElement.scrollWidth")
    await screenshot(page, "09-phone-inspector")
    await close_context(context)

    assert (chat_width, inspector_width) == (390, 390)


async def test_bob_sees_none_of_alices_threads_or_memories(bob_context: BrowserContext, app: str) -> None:
    page = await bob_context.new_page()
    await page.goto(app + "/")
    await expect(page.get_by_text("No threads found")).to_be_visible(timeout=TIMEOUT_MS)
    await expect(page.get_by_text("please list the inventory")).to_have_count(0)
    response = await bob_context.request.get(f"{app}/project/thread/{AliceThread.thread_id}")
    assert response.status in (401, 403, 404)
    listed = await (await bob_context.request.get(app + "/memory-api/memories")).json()
    assert AliceThread.key not in json.dumps(listed)
    content = await bob_context.request.get(f"{app}/memory-api/memories/{AliceThread.key}/content")
    assert content.status == 404
    await page.goto(f"{app}/memories")
    await expect(page.get_by_test_id("memory-row").filter(has_text=AliceThread.key)).to_have_count(0)
    await expect(page.get_by_test_id("status")).to_contain_text("memor", timeout=TIMEOUT_MS)
    await screenshot(page, "06-bob-inspector")
    await page.close()


async def test_bob_opening_alices_thread_url_gets_nothing_and_changes_nothing(
    bob_context: BrowserContext, app: str, ui_store: MemoryStore
) -> None:
    steps_before = await ui_store.db.pool.fetchval(
        'SELECT count(*) FROM "Step" WHERE "threadId" = $1', AliceThread.thread_id
    )
    page = await bob_context.new_page()
    response = await page.goto(f"{app}/thread/{AliceThread.thread_id}")
    assert response is not None and response.status == 404
    await expect(page.get_by_role("heading", name="Chat not found")).to_be_visible(timeout=TIMEOUT_MS)
    await expect(page.get_by_text("inventory")).to_have_count(0)
    never_existed = await bob_context.request.get(f"{app}/thread/{uuid.uuid4()}")
    foreign = await bob_context.request.get(f"{app}/thread/{AliceThread.thread_id}")
    assert (never_existed.status, foreign.status) == (404, 404)
    assert (await foreign.text()).replace(AliceThread.thread_id, "ID") == (await never_existed.text()).replace(
        never_existed.url.rsplit("/", 1)[-1], "ID"
    )
    await screenshot(page, "07-bob-foreign-thread-url")
    await page.close()
    pool = ui_store.db.pool
    owner = await pool.fetchval(
        'SELECT u.identifier FROM "Thread" t JOIN "User" u ON u.id = t."userId" WHERE t.id = $1',
        AliceThread.thread_id,
    )
    assert owner == ALICE
    assert await pool.fetchval('SELECT count(*) FROM "Step" WHERE "threadId" = $1', AliceThread.thread_id) == (
        steps_before
    )
