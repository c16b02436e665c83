"""The thread pages and API answer another user's thread as a missing one, under a root_path as well.

The rest is tested through a running UI (test_ui_api, test_ui_browser); a root_path needs a proxy in front of
the UI, so this drives the middleware as Chainlit's server would, under ``/chat``.
"""

from __future__ import annotations

import pytest
from chainlit.auth.jwt import create_jwt
from chainlit.config import config as chainlit_config
from chainlit.user import User
from starlette.types import Message, Receive, Scope, Send

from chainlit_app.thread_pages import ForeignThreadPages


async def _owner(thread_id: str) -> str | None:
    return {"bobs-thread": "bob"}.get(thread_id)


async def _status(path: str, token: str) -> int:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    scope: Scope = {
        "type": "http", "method": "GET", "path": path, "root_path": "", "query_string": b"",
        "headers": [(b"authorization", f"Bearer {token}".encode())],
    }  # fmt: skip
    await ForeignThreadPages(app, owner=_owner)(scope, receive, send)
    return int(sent[0]["status"])


@pytest.mark.parametrize("path", ["/chat/project/thread/bobs-thread", "/chat/thread/bobs-thread"])
async def test_under_a_root_path_another_users_thread_is_not_found(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAINLIT_AUTH_SECRET", "a-test-secret-of-at-least-thirty-two-bytes")
    monkeypatch.setattr(chainlit_config.run, "root_path", "/chat")
    alices = create_jwt(User(identifier="alice"))
    bobs = create_jwt(User(identifier="bob"))

    assert await _status(path, alices) == 404
    assert await _status(path, bobs) == 200
