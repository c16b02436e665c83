"""Chainlit hooks of the agent-memory chat UI. Start it with ``agent-memory ui``.

- Login: passwords from ``agent-memory user add`` (scrypt hashes in PostgreSQL); optionally a trusted header
  set by an SSO proxy (``AGENT_MEMORY_UI_HEADER_AUTH=1``, header ``AGENT_MEMORY_UI_TRUSTED_HEADER``,
  default ``X-Forwarded-User``). Chainlit signs the session with ``CHAINLIT_AUTH_SECRET``.
- History: Chainlit's own PostgreSQL data layer on the agent-memory database; Chainlit shows each user
  only their threads and refuses to resume anyone else's.
- Chat: per session a CodeAgent + executor team whose model context is a MemoryContext for the logged-in
  user and the current thread (:class:`chainlit_app.ui_agent_builder.UIAgentBuilder`), streamed as steps.
- Memory: the ``Memories`` and ``Search`` commands in the composer, and the inspector page ``/memories``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import chainlit as cl
from chainlit.config import config as chainlit_config
from chainlit.data.chainlit_data_layer import ChainlitDataLayer
from chainlit.server import app as server_app
from chainlit.server import router as server_router
from chainlit.server import sio
from chainlit.session import WebsocketSession
from chainlit.types import CommandDict, ThreadDict
from starlette.middleware.trustedhost import TrustedHostMiddleware

from agent_memory.auth import UserAccounts, auth_secret
from agent_memory.config import header_auth_enabled
from agent_memory.store import ThreadStore
from chainlit_app import (
    feedback_guard,
    header_login,
    inspector,
    login_throttle,
    peers,
    request_limits,
    security_headers,
    sessions,
)
from chainlit_app.chat import ChatSession, memory_overview, search_overview
from chainlit_app.chat_slots import ChatSlots, ClosedSessions
from chainlit_app.runtime import AgentMemoryDataLayer, close_store, database_url, drop_chainlit_ci_key, get_store
from chainlit_app.thread_pages import ForeignThreadPages

# `chainlit run` builds uvicorn's config after loading this module, and uvicorn reads this then: with it,
# request.client is the TCP peer, never an X-Forwarded-For value (`agent-memory ui` sets it as well).
peers.keep_the_tcp_peer(os.environ)

inspector.mount(server_app)


async def _session_version(identifier: str) -> int | None:
    return await UserAccounts((await get_store()).db).session_version(identifier)


async def _end_sessions(identifier: str) -> int | None:
    return await UserAccounts((await get_store()).db).end_sessions(identifier)


async def _thread_owner(thread_id: str) -> str | None:
    return await ThreadStore((await get_store()).db).owner(thread_id)


async def _step_owner(step_id: str) -> str | None:
    found = await ThreadStore((await get_store()).db).step(step_id)
    return None if found is None else found[1]


async def _feedback_owner(feedback_id: str) -> str | None:
    return await ThreadStore((await get_store()).db).feedback_owner(feedback_id)


# Feedback on a message is its owner's (Chainlit's routes check no owner).
feedback_guard.guard_feedback_routes(server_router, step_owner=_step_owner, feedback_owner=_feedback_owner)


# Inner to the session guard (added first), so it sees a revoked session as logged out.
server_app.add_middleware(ForeignThreadPages, owner=_thread_owner)  # another user's /thread/<id>: "not found"
# Sessions end on logout, password change and user deletion; they last AGENT_MEMORY_UI_SESSION_HOURS.
chainlit_config.project.user_session_timeout = sessions.session_lifetime_seconds(os.environ)
# It also refuses session renewal (/auth/jwt) and the chat socket from origins not the UI's own.
server_app.add_middleware(
    sessions.SessionGuard,
    versions=_session_version,
    end_sessions=_end_sessions,
    origins=sessions.allowed_origins(os.environ),
)
server_app.add_middleware(request_limits.RequestLimits)  # disabled uploads, big login bodies: refused unread
login_throttle.mount(server_app, login_throttle.LoginThrottle.from_env(), peers.trusted_proxies())
server_app.add_middleware(security_headers.SecurityHeaders)  # CSP: no remote images, no fetches elsewhere
if _allowed_hosts := [h.strip() for h in os.environ.get("AGENT_MEMORY_UI_ALLOWED_HOSTS", "").split(",") if h.strip()]:
    # Requests naming another Host (DNS rebinding, a misrouted proxy) are refused with 400.
    server_app.add_middleware(TrustedHostMiddleware, allowed_hosts=_allowed_hosts)

drop_chainlit_ci_key(os.environ, ci_mode=chainlit_config.run.ci)  # `chainlit run --ci`: its key is fake

# `agent-memory ui` passes the secret; run directly (`chainlit run chainlit_app/app.py`) it comes from the
# same file under AGENT_MEMORY_HOME, so sessions stay valid across both ways of starting.
os.environ.setdefault("CHAINLIT_AUTH_SECRET", auth_secret())

# Chainlit logs INFO to stdout; AutoGen's INFO events would log every streamed token.
for _name in ("autogen_core", "autogen_core.events", "autogen_agentchat", "httpx", "openai"):
    logging.getLogger(_name).setLevel(logging.WARNING)


class _DropCancellations(logging.Filter):
    """Stop cancels the run on purpose; AutoGen logs that as an error with a CancelledError traceback per agent."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


logging.getLogger("autogen_core").addFilter(_DropCancellations())

COMMANDS: list[CommandDict] = [
    {
        "id": "Memories",
        "icon": "brain",
        "description": "What memory holds for this thread",
        "button": True,
        "persistent": False,
        "selected": False,
    },
    {
        "id": "Search",
        "icon": "search",
        "description": "Search your memories for the text you type",
        "button": True,
        "persistent": False,
        "selected": False,
    },
]


@cl.data_layer
def _data_layer() -> ChainlitDataLayer:
    return AgentMemoryDataLayer(database_url=database_url())


@cl.on_app_startup
async def _startup() -> None:
    await get_store()  # applies the schema (Chainlit's tables included) before the first request


@cl.on_app_shutdown
async def _shutdown() -> None:
    await close_store()


@cl.password_auth_callback
async def _password_login(username: str, password: str) -> cl.User | None:
    accounts = UserAccounts((await get_store()).db)
    if await accounts.verify(username.strip(), password):
        version = await accounts.session_version(username.strip())
        return cl.User(identifier=username.strip(), metadata={"provider": "password", sessions.VERSION_KEY: version})
    return None


if header_auth_enabled():
    _TRUSTED_HEADER = header_login.trusted_header()
    if not peers.trusted_proxies():
        logging.getLogger(__name__).warning(
            "header login is on but AGENT_MEMORY_UI_TRUSTED_PROXIES is empty: every header login is refused"
        )
    header_login.mount(server_app)

    @cl.header_auth_callback
    async def _header_login(headers: Any) -> cl.User | None:
        user = header_login.trusted_user(headers, _TRUSTED_HEADER)
        if user is not None:
            # The data layer creates a new user on this login; until then the version is 0.
            version = await UserAccounts((await get_store()).db).session_version(user.identifier)
            user.metadata[sessions.VERSION_KEY] = version or 0
        return user


def _identifier() -> str:
    user = cl.user_session.get("user")
    if user is None:  # Chainlit only opens sessions for logged-in users when auth is configured
        raise RuntimeError("no logged-in user in this session")
    return str(user.identifier)


_chat_slots = ChatSlots.from_env(os.environ)
_closed_sessions = ClosedSessions(_chat_slots.per_user)
# The chat session of each socket session, by Chainlit's session id. Not in cl.user_session: Chainlit replaces
# that dict when a socket resumes a thread, and each "connection_successful" then took a new slot and team.
_chats: dict[str, ChatSession] = {}


def _chat() -> ChatSession | None:
    return _chats.get(cl.context.session.id)


def _socket_open() -> bool:
    # False from the moment the socket starts disconnecting, so also while (and after) on_chat_end runs.
    socket_id = getattr(cl.context.session, "socket_id", None)
    return socket_id is None or _connected(socket_id)


def _connected(socket_id: str) -> bool:
    return bool(sio.manager.is_connected(socket_id, "/"))


async def _open_session() -> ChatSession | None:
    """Start this socket's chat session, or say why not (None): the user holds the most sessions allowed."""
    # A resumed thread needs nothing extra: Chainlit set session.thread_id to it (after refusing the
    # socket if the thread belongs to someone else), and the builder's MemoryContext loads its saved state.
    user, store = _identifier(), await get_store()
    key, thread_id = cl.context.session.id, cl.context.session.thread_id
    current = _chats.get(key)
    if current is not None and current.thread_id == thread_id:  # a message raced the chat start, or a resume
        return current
    if current is not None:  # the socket resumed another thread: a new team, in the slot the socket holds
        del _chats[key]
        await current.close()
    # No await from taking the slot to storing the session: on_chat_end finds the session, or we see it closing.
    elif not _chat_slots.take(user):
        await cl.Message(content=_chat_slots.refusal(), author="agent-memory").send()
        return None
    if not _socket_open():  # it closed while we got here: on_chat_end has run, or runs without this session
        _chat_slots.give_back(user)
        return None
    session = ChatSession(user_id=user, thread_id=thread_id, store=store)
    _chats[key] = session
    await cl.context.emitter.set_commands(COMMANDS)
    await session.start()
    return session


@cl.on_chat_start
async def _on_chat_start() -> None:
    await _open_session()


@cl.on_chat_resume
async def _on_chat_resume(thread: ThreadDict) -> None:
    await _open_session()


@cl.on_message
async def _on_message(message: cl.Message) -> None:
    session = _chat()
    if session is None:  # refused at chat start, or reconnected after its session ended: try (again)
        session = await _open_session()
        if session is None:
            return
    if message.command == "Memories":
        await memory_overview(session)
    elif message.command == "Search":
        await search_overview(session, message.content)
    else:
        await session.run(message.content)


@cl.on_stop
async def _on_stop() -> None:
    session = _chat()
    if session is not None:
        session.stop()


def _closed_and_kept(session_id: str) -> bool:
    kept = WebsocketSession.get_by_id(session_id)
    return kept is not None and not _connected(kept.socket_id)


@cl.on_chat_end
async def _on_chat_end() -> None:
    # Chainlit calls this on every disconnect and keeps the session for a reconnect, which then starts a new one.
    socket_session = cl.context.session
    if isinstance(socket_session, WebsocketSession) and socket_session.user is not None:
        # Beyond the user's closed sessions kept, Chainlit ends this one now instead of in an hour.
        keep = _closed_sessions.keep(socket_session.user.identifier, socket_session.id, still_kept=_closed_and_kept)
        socket_session.to_clear = socket_session.to_clear or not keep
    session = _chats.pop(cl.context.session.id, None)  # before any await: a second call finds nothing to give back
    if session is None:
        return
    try:
        await session.close()
    finally:
        _chat_slots.give_back(session.user_id)


@cl.action_callback("delete_memory")
async def _delete_memory(action: cl.Action) -> None:
    session = _chat()
    if session is not None:
        await session.delete_memory(str(action.payload.get("key", "")))
