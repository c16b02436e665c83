"""The UI server over plain HTTP (login, the memory API and its isolation), without any model configured,
and behind an SSO proxy (trusted header login).

One `agent-memory ui` process with no OPENAI_* variables (but ``CI=true``, see ``ui_env``) and
``AGENT_MEMORY_UI_HEADER_AUTH=1``. The HTTP tests need no browser; the browser tests skip without chromium.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import jwt
import pytest
from playwright.async_api import Browser, Route, expect
from ui_support import (
    ARTIFACTS,
    add_user,
    chat_ready,
    close_context,
    from_address,
    login,
    requires_chromium,
    running_ui,
    screenshot,
    ui_env,
)

from agent_memory import MemoryStore
from agent_memory.auth import UserAccounts

pytestmark = [pytest.mark.asyncio(loop_scope="session")]

TIMEOUT_MS = 60_000
PROXY_HEADER = "X-Forwarded-User"


@pytest.fixture(scope="module")
def app(ui_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = ui_env(
        ui_database,
        tmp_path_factory.mktemp("ui-home"),
        AGENT_MEMORY_UI_HEADER_AUTH="1",
        AGENT_MEMORY_UI_TRUSTED_HEADER=PROXY_HEADER,
        AGENT_MEMORY_UI_TRUSTED_PROXIES="127.0.0.1",  # the test's "proxy"; other loopback addresses are not it
        AGENT_MEMORY_UI_SESSION_HOURS="2",
    )
    for name in ("carol", "erin", "gina", "henry", "ivan", "kai", "lena"):
        add_user(name, f"{name}-secret-password", env)
    with running_ui(env, ARTIFACTS / "app-no-model.log") as base:
        yield base


NO_MODEL = "No model is configured"


@requires_chromium
async def test_without_a_model_the_chat_says_what_to_set(browser: Browser, app: str) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    await login(page, app, "carol", "carol-secret-password")
    await expect(page.get_by_text(NO_MODEL)).to_be_visible(timeout=TIMEOUT_MS)
    await expect(page.get_by_text("OPENAI_API_KEY").first).to_be_visible()
    cut_off = await page.evaluate(
        "[...document.querySelectorAll('pre')].filter(p => p.scrollWidth > p.clientWidth + 1).length"
    )
    await screenshot(page, "10-no-model")
    assert cut_off == 0  # the advice wraps: nothing hides past the right edge
    await close_context(context)


@requires_chromium
async def test_without_a_model_a_message_is_answered_with_what_to_set(browser: Browser, app: str) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    await login(page, app, "carol", "carol-secret-password")
    await chat_ready(page, TIMEOUT_MS)
    box = page.locator("#chat-input")
    await box.fill("please list the files")
    await box.press("Enter")
    await expect(page.get_by_text("Your message was not run.")).to_be_visible(timeout=TIMEOUT_MS)
    await expect(page.get_by_text(NO_MODEL).last).to_be_visible()
    await close_context(context)


@requires_chromium
async def test_a_trusted_proxy_header_logs_the_user_in(browser: Browser, app: str) -> None:
    context = await browser.new_context(extra_http_headers={PROXY_HEADER: "dave"})
    page = await context.new_page()
    await page.goto(app + "/")
    await chat_ready(page, TIMEOUT_MS)  # the session's socket is up: the header login and its cookie are done
    who = await context.request.get(app + "/memory-api/memories")
    assert who.status == 200
    assert (await who.json())["user"] == "dave"
    await close_context(context)


@requires_chromium
async def test_a_header_login_answered_late_does_not_undo_a_password_login(browser: Browser, app: str) -> None:
    # The login page asks /auth/header as soon as it has loaded; we hold that request until the password
    # login is done and the chat runs. Answered with a 401, Chainlit's client then loads /login again.
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    asked, release = asyncio.Event(), asyncio.Event()

    async def hold(route: Route) -> None:
        asked.set()
        await release.wait()
        await route.continue_()

    await page.route("**/auth/header", hold)
    page_loads: list[str] = []
    page.on("request", lambda request: page_loads.append(request.url) if request.resource_type == "document" else None)
    await page.goto(app + "/login")
    await asyncio.wait_for(asked.wait(), TIMEOUT_MS / 1000)  # the header attempt is under way before we log in
    await login(page, app, "carol", "carol-secret-password", navigate=False)
    await chat_ready(page, TIMEOUT_MS)
    async with page.expect_response("**/auth/header") as answer:
        release.set()
    header_answer = await answer.value
    box = page.locator("#chat-input")
    await box.fill("are you still there")
    await box.press("Enter")
    await expect(page.get_by_text("Your message was not run.")).to_be_visible(timeout=TIMEOUT_MS)
    await expect(page.get_by_role("main").get_by_text("are you still there")).to_be_visible()
    assert page_loads == [app + "/login"]  # the login page was loaded once, by the test
    assert header_answer.status == 200
    await close_context(context)


# ---------------------------------------------------------------------------------------------- HTTP


@asynccontextmanager
async def logged_in(app: str, name: str, password: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        response = await client.post("/login", data={"username": name, "password": password})
        assert response.status_code == 200, response.text
        yield client


async def test_login_with_a_wrong_password_is_refused_over_http(app: str) -> None:
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        response = await client.post("/login", data={"username": "carol", "password": "carol-wrong-password"})
        assert response.status_code == 401
        assert response.json()["detail"] == "wrong user name or password"  # not Chainlit's "credentialssignin"
        unknown = await client.post("/login", data={"username": "nobody", "password": "carol-secret-password"})
        assert unknown.status_code == 401
        assert (await client.get("/memory-api/memories")).status_code == 401


async def test_the_memory_api_serves_the_logged_in_user_only(app: str, ui_store: MemoryStore) -> None:
    mine = await ui_store.store("carol's build log\nERROR disk full\n", user_id="carol", description="build log")
    theirs = await ui_store.store("erin's secret\n", user_id="erin", description="erin secret")
    async with logged_in(app, "carol", "carol-secret-password") as client:
        listed = (await client.get("/memory-api/memories")).json()
        assert listed["user"] == "carol"
        assert [m["key"] for m in listed["memories"]] == [mine]
        found = (await client.get("/memory-api/memories", params={"q": "disk full"})).json()
        assert [m["key"] for m in found["memories"]] == [mine]
        content = await client.get(f"/memory-api/memories/{mine}/content")
        assert content.text == "carol's build log\nERROR disk full\n"
        for path in (f"/memory-api/memories/{theirs}", f"/memory-api/memories/{theirs}/content"):
            assert (await client.get(path)).status_code == 404
        assert (await client.delete(f"/memory-api/memories/{theirs}")).status_code == 404
        assert (await client.get("/memory-api/memories", params={"q": "erin secret"})).json()["memories"] == []
        assert (await client.delete(f"/memory-api/memories/{mine}")).status_code == 200
        assert (await client.get(f"/memory-api/memories/{mine}")).status_code == 404
    assert await ui_store.retrieve(theirs, user_id="erin") == "erin's secret\n"


async def test_the_inspector_shows_history_status_and_why_a_hit_was_found(app: str, ui_store: MemoryStore) -> None:
    key = await ui_store.store("tabs", user_id="carol", description="indent: tabs", memory_type="user_preference")
    await ui_store.update(key, user_id="carol", content="4 spaces", actor="carol", surface="cli")
    await ui_store.retract(key, user_id="carol", reason="no preference after all", surface="cli")
    theirs = await ui_store.store("erin's", user_id="erin")
    async with logged_in(app, "carol", "carol-secret-password") as client:
        history = (await client.get(f"/memory-api/memories/{key}/history")).json()
        item = (await client.get(f"/memory-api/memories/{key}")).json()
        found = await ui_store.store("the deploy failed: ERROR 137", user_id="carol", description="deploy log")
        hits = (await client.get("/memory-api/memories", params={"q": "deploy failed"})).json()["memories"]
        assert (await client.get(f"/memory-api/memories/{theirs}/history")).status_code == 404

    assert [v["version"] for v in history["versions"]] == [1, 2]
    assert [e["action"] for e in history["audit"]] == ["retract", "update", "store"]
    assert (item["status"], item["status_reason"], item["version"]) == ("retracted", "no preference after all", 2)
    assert hits[0]["key"] == found and "fts" in hits[0]["why"]
    assert 0 < hits[0]["why"]["fts"]["evidence"] <= 1


async def test_header_login_without_the_header_fails_without_a_401(app: str) -> None:
    # Chainlit's client answers any 401 by loading /login, even after a password login succeeded meanwhile.
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        response = await client.post("/auth/header", json={})
        assert response.status_code == 200
        assert response.json()["success"] is False
        assert PROXY_HEADER in response.json()["detail"]
        assert not response.cookies
        assert (await client.get("/memory-api/memories")).status_code == 401


async def test_header_login_with_the_header_logs_that_user_in(app: str) -> None:
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        response = await client.post("/auth/header", json={}, headers={PROXY_HEADER: "frank"})
        assert response.status_code == 200
        assert response.json()["success"] is True
        who = await client.get("/memory-api/memories")
        assert who.status_code == 200
        assert who.json()["user"] == "frank"


async def test_a_token_signed_with_another_secret_is_refused(app: str) -> None:
    claims = {"identifier": "erin", "metadata": {}, "exp": 4102444800}
    forged = jwt.encode(claims, "a-different-secret-of-at-least-32-bytes", "HS256")
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        response = await client.get("/memory-api/memories", headers={"Authorization": f"Bearer {forged}"})
        assert response.status_code == 401


async def test_thread_stats_count_tokens_kept_out_of_the_context(app: str, ui_store: MemoryStore) -> None:
    big = "".join(f"line {i}: some build output\n" for i in range(2000))
    await ui_store.store(big, user_id="carol", description="build output", thread_id="thread-stats-1")
    await ui_store.store(big, user_id="erin", description="erin's build", thread_id="thread-stats-1")
    async with logged_in(app, "carol", "carol-secret-password") as client:
        stats = (await client.get("/memory-api/threads/thread-stats-1/stats")).json()
    assert stats["memories"] == 1  # erin's memory in a thread of the same id is not counted
    assert stats["stored_tokens"] > 10_000
    assert 0 < stats["placeholder_tokens"] < 100
    assert stats["kept_out_tokens"] == stats["stored_tokens"] - stats["placeholder_tokens"]


async def test_deleting_a_thread_drops_its_saved_context_but_keeps_memories(app: str, ui_store: MemoryStore) -> None:
    pool = ui_store.db.pool
    key = await ui_store.store("kept after the thread is gone\n", user_id="carol", thread_id="thread-del-1")
    await ui_store.store("erin's\n", user_id="erin", thread_id="thread-del-1")  # makes sure erin exists
    carol = await pool.fetchval('SELECT id FROM "User" WHERE identifier = $1', "carol")
    erin = await pool.fetchval('SELECT id FROM "User" WHERE identifier = $1', "erin")
    await pool.execute('INSERT INTO "Thread" (id, "userId", name) VALUES ($1, $2, $3)', "thread-del-1", carol, "t")
    for owner in (carol, erin):
        await pool.execute(
            "INSERT INTO agent_memory_contexts (user_id, thread_id, agent_key, state) VALUES ($1, $2, $3, $4)",
            owner, "thread-del-1", "coder", {"entries": []},
        )  # fmt: skip
    async with logged_in(app, "erin", "erin-secret-password") as client:
        response = await client.request("DELETE", "/project/thread", json={"threadId": "thread-del-1"})
        assert response.status_code in (401, 403, 404)  # not erin's thread
    async with logged_in(app, "carol", "carol-secret-password") as client:
        response = await client.request("DELETE", "/project/thread", json={"threadId": "thread-del-1"})
        assert response.status_code == 200
    owners = await pool.fetch("SELECT user_id FROM agent_memory_contexts WHERE thread_id = $1", "thread-del-1")
    assert [r["user_id"] for r in owners] == [erin]
    assert await ui_store.retrieve(key, user_id="carol") == "kept after the thread is gone\n"


async def test_the_thread_api_answers_another_users_thread_as_a_missing_one(app: str, ui_store: MemoryStore) -> None:
    step_id = await _carols_step(ui_store)
    carols = await ui_store.db.pool.fetchval('SELECT "threadId" FROM "Step" WHERE id = $1', step_id)
    async with logged_in(app, "erin", "erin-secret-password") as client:
        foreign = await client.get(f"/project/thread/{carols}")
        missing = await client.get(f"/project/thread/{uuid.uuid4()}")
        element = await client.get(f"/project/thread/{carols}/element/{uuid.uuid4()}")
    assert [foreign.status_code, missing.status_code, element.status_code] == [404, 404, 404]
    assert foreign.json() == missing.json()
    async with logged_in(app, "carol", "carol-secret-password") as client:
        assert (await client.get(f"/project/thread/{carols}")).status_code == 200


async def _carols_step(ui_store: MemoryStore) -> str:
    pool = ui_store.db.pool
    await ui_store.store("makes sure carol exists\n", user_id="carol")
    carol = await pool.fetchval('SELECT id FROM "User" WHERE identifier = $1', "carol")
    thread_id, step_id = f"thread-fb-{uuid.uuid4()}", str(uuid.uuid4())
    await pool.execute('INSERT INTO "Thread" (id, "userId", name) VALUES ($1, $2, $3)', thread_id, carol, "t")
    await pool.execute(
        """INSERT INTO "Step" (id, "threadId", name, type, output, "startTime", "endTime")
           VALUES ($1, $2, 'Assistant', 'assistant_message', 'an answer', now(), now())""",
        step_id, thread_id,
    )  # fmt: skip
    return step_id


def _feedback(step_id: str, comment: str, feedback_id: str | None = None) -> dict[str, object]:
    return {"feedback": {"forId": step_id, "value": 1, "comment": comment, "id": feedback_id}, "sessionId": "s"}


async def test_feedback_on_another_users_message_is_refused_as_not_found(app: str, ui_store: MemoryStore) -> None:
    step_id = await _carols_step(ui_store)
    async with logged_in(app, "erin", "erin-secret-password") as client:
        response = await client.put("/feedback", json=_feedback(step_id, "written by erin"))
    assert response.status_code == 404
    assert await ui_store.db.pool.fetchval('SELECT count(*) FROM "Feedback" WHERE "stepId" = $1', step_id) == 0


async def test_another_users_feedback_cannot_be_overwritten_or_deleted(app: str, ui_store: MemoryStore) -> None:
    step_id = await _carols_step(ui_store)
    async with logged_in(app, "carol", "carol-secret-password") as client:
        feedback_id = (await client.put("/feedback", json=_feedback(step_id, "carol's"))).json()["feedbackId"]
    async with logged_in(app, "erin", "erin-secret-password") as client:
        own_step = await _carols_step(ui_store)  # any step: erin names carol's feedback id
        overwrite = await client.put("/feedback", json=_feedback(own_step, "erin's", feedback_id))
        delete = await client.request("DELETE", "/feedback", json={"feedbackId": feedback_id})
    assert (overwrite.status_code, delete.status_code) == (404, 404)
    row = await ui_store.db.pool.fetchrow('SELECT "stepId", comment FROM "Feedback" WHERE id = $1', feedback_id)
    assert (row["stepId"], row["comment"]) == (step_id, "carol's")


async def test_feedback_on_ones_own_message_is_kept_and_deleted(app: str, ui_store: MemoryStore) -> None:
    step_id = await _carols_step(ui_store)
    async with logged_in(app, "carol", "carol-secret-password") as client:
        saved = await client.put("/feedback", json=_feedback(step_id, "helpful"))
        assert saved.status_code == 200
        feedback_id = saved.json()["feedbackId"]
        assert (await client.request("DELETE", "/feedback", json={"feedbackId": feedback_id})).status_code == 200
    assert await ui_store.db.pool.fetchval('SELECT count(*) FROM "Feedback" WHERE id = $1', feedback_id) == 0


# ---------------------------------------------------------------------------------------------- sessions


async def session_cookie(app: str, name: str) -> dict[str, str]:
    async with logged_in(app, name, f"{name}-secret-password") as client:
        assert (await client.get("/memory-api/memories")).status_code == 200
        return dict(client.cookies)


async def status_with(app: str, cookies: dict[str, str]) -> int:
    async with httpx.AsyncClient(base_url=app, timeout=30, cookies=cookies) as client:
        return (await client.get("/memory-api/memories")).status_code


async def test_logout_ends_the_users_sessions_even_for_a_copied_cookie(app: str) -> None:
    copied = await session_cookie(app, "gina")
    async with httpx.AsyncClient(base_url=app, timeout=30, cookies=copied) as client:
        assert (await client.post("/logout")).status_code == 200
    assert await status_with(app, copied) == 401
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:  # the raw token as a bearer: refused too
        bearer = {"Authorization": f"Bearer {copied['access_token']}"}
        assert (await client.get("/memory-api/memories", headers=bearer)).status_code == 401
    assert await status_with(app, await session_cookie(app, "gina")) == 200  # a new login works


async def test_a_password_change_ends_earlier_sessions(app: str, ui_store: MemoryStore) -> None:
    before = await session_cookie(app, "ivan")
    await UserAccounts(ui_store.db).add("ivan", "ivan-secret-password", replace=True)
    assert await status_with(app, before) == 401


async def test_deleting_the_user_ends_their_sessions(app: str, ui_store: MemoryStore) -> None:
    await UserAccounts(ui_store.db).add("jules", "jules-secret-password")
    before = await session_cookie(app, "jules")
    await ui_store.forget_user("jules")
    assert await status_with(app, before) == 401


async def test_sessions_last_the_configured_lifetime(app: str) -> None:
    token = (await session_cookie(app, "erin"))["access_token"]
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 2 * 3600


async def test_failed_logins_lock_the_account_from_that_address_even_with_the_right_password(app: str) -> None:
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        for _ in range(5):
            wrong = await client.post("/login", data={"username": "henry", "password": "guess-guess-guess"})
            assert wrong.status_code == 401
        right = await client.post("/login", data={"username": "henry", "password": "henry-secret-password"})
    assert right.status_code == 429
    assert "try again in" in right.json()["detail"] and int(right.headers["Retry-After"]) > 0
    assert await status_with(app, await session_cookie(app, "carol")) == 200  # other accounts are unaffected


async def test_failed_logins_from_one_address_do_not_lock_the_account_elsewhere(app: str) -> None:
    async with from_address(app, "127.0.0.8") as stranger:
        for _ in range(5):
            assert (await stranger.post("/login", data={"username": "lena", "password": "x" * 12})).status_code == 401
        assert (await stranger.post("/login", data={"username": "lena", "password": "x" * 12})).status_code == 429
    async with from_address(app, "127.0.0.9") as lenas_laptop:
        right = await lenas_laptop.post("/login", data={"username": "lena", "password": "lena-secret-password"})
    assert right.status_code == 200


async def test_guesses_sent_at_once_are_checked_only_as_far_as_the_limit_allows(app: str) -> None:
    # The password check is slow (scrypt): every guess must count from the moment its check starts.
    async with from_address(app, "127.0.0.4") as guesser:
        guesses = [{"username": "kai", "password": f"guess-{i:03d}-guess"} for i in range(30)]
        answers = await asyncio.gather(*(guesser.post("/login", data=guess) for guess in guesses))
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [401] * 5 + [429] * 25


async def test_many_failures_from_one_address_lock_that_address(app: str) -> None:
    async with from_address(app, "127.0.0.3") as flooder:
        for i in range(20):
            await flooder.post("/login", data={"username": f"nobody-{i}", "password": "x" * 12})
        blocked = await flooder.post("/login", data={"username": "carol", "password": "carol-secret-password"})
    assert blocked.status_code == 429
    assert await status_with(app, await session_cookie(app, "carol")) == 200  # from another address: fine


async def test_header_login_from_an_untrusted_address_is_refused(app: str) -> None:
    async with from_address(app, "127.0.0.2") as local_process:
        response = await local_process.post("/auth/header", json={}, headers={PROXY_HEADER: "carol"})
        assert response.status_code == 200 and response.json()["success"] is False
        assert "AGENT_MEMORY_UI_TRUSTED_PROXIES" in response.json()["detail"]
        assert not response.cookies
        assert (await local_process.get("/memory-api/memories")).status_code == 401


async def test_every_page_forbids_remote_images_and_requests(app: str) -> None:
    async with logged_in(app, "erin", "erin-secret-password") as client:
        for path in ("/", "/login", "/memories", "/memory-api/memories"):
            policy = (await client.get(path)).headers.get("content-security-policy", "")
            assert "img-src 'self' data: blob:" in policy and "connect-src 'self'" in policy, path
            assert "frame-ancestors 'none'" in policy


async def test_the_login_form_asks_for_a_user_name_not_an_email_address(app: str) -> None:
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        texts = (await client.get("/project/translations", params={"language": "en-US"})).json()["translation"]
    assert texts["auth"]["login"]["form"]["email"]["label"] == "User name"
    assert texts["auth"]["login"]["errors"]["credentialsSignin"] == "Wrong user name or password."


async def test_the_logo_is_agent_memorys_not_chainlits(app: str) -> None:
    async with httpx.AsyncClient(base_url=app, timeout=30) as client:
        for theme in ("dark", "light"):
            logo = await client.get("/logo", params={"theme": theme})
            assert logo.status_code == 200 and "agent-memory" in logo.text and "Chainlit" not in logo.text
