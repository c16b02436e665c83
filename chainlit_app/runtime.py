"""Process-wide resources of the UI: the database URL, one MemoryStore, Chainlit's data layer, and the connection
to the executor workers when users' code runs on other machines (``AGENT_MEMORY_RUNTIME``).

``agent-memory ui`` passes ``AGENT_MEMORY_DATABASE_URL`` (the embedded server it started, or the configured
server). Run directly (``chainlit run chainlit_app/app.py``) without a URL, the embedded server is started
here, once, before Chainlit's event loop runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import MutableMapping
from typing import Any

from autogen_core import AgentRuntime
from chainlit.context import context
from chainlit.data.chainlit_data_layer import ChainlitDataLayer

from agent_memory import MemoryStore
from agent_memory.agents import LocalSessions, RemoteAgentSession, connect_executor_runtime, tls_from_env
from agent_memory.config import get_settings
from agent_memory.store import ThreadStore, start_embedded_server

# What `chainlit run` sets as OPENAI_API_KEY in its CI mode (`--ci`, or CI=true in the environment).
CHAINLIT_CI_FAKE_OPENAI_KEY = "sk-FAKE-OPENAI-API-KEY"

log = logging.getLogger(__name__)

_store: MemoryStore | None = None
_store_lock: asyncio.Lock | None = None
_executor_runtime: AgentRuntime | None = None
_local_sessions: LocalSessions | None = None
_executor_lock: asyncio.Lock | None = None


def database_url() -> str:
    """The URL every part of the UI uses; starts the embedded server when none is configured."""
    url = os.environ.get("AGENT_MEMORY_DATABASE_URL")
    if not url:
        server = asyncio.run(start_embedded_server(get_settings().resolved_home()))
        url = server.uri
        os.environ["AGENT_MEMORY_DATABASE_URL"] = url
    return url


def drop_chainlit_ci_key(environ: MutableMapping[str, str], ci_mode: bool) -> bool:
    """Remove the fake OpenAI key Chainlit's CI mode put in ``environ``; True when it did.

    That key is not a model: left in place, the agents would call api.openai.com with it instead of the
    chat saying what to set. ``agent-memory ui`` never starts Chainlit in CI mode; this covers direct runs.
    """
    if not ci_mode or environ.get("OPENAI_API_KEY") != CHAINLIT_CI_FAKE_OPENAI_KEY:
        return False
    del environ["OPENAI_API_KEY"]
    logging.getLogger(__name__).warning("Chainlit runs in CI mode: its fake OPENAI_API_KEY is ignored")
    return True


async def get_store() -> MemoryStore:
    """The process's MemoryStore (opened on first use, on Chainlit's event loop)."""
    global _store, _store_lock
    if _store is not None:
        return _store
    if _store_lock is None:
        _store_lock = asyncio.Lock()
    async with _store_lock:
        if _store is None:
            _store = await MemoryStore.open(database_url())
    return _store


async def close_store() -> None:
    global _store, _executor_runtime
    if _store is not None:
        await _store.close()
        _store = None
    if _executor_runtime is not None:
        await _executor_runtime.stop()  # type: ignore[attr-defined]
        _executor_runtime = None


def local_sessions() -> LocalSessions:
    """The process's in-process runtime with the session actors of its chats (one machine)."""
    global _local_sessions
    if _local_sessions is None:
        _local_sessions = LocalSessions()
    return _local_sessions


def executor_shards() -> int:
    """How many executor workers share the users (``AGENT_MEMORY_EXECUTOR_SHARDS``, default 1)."""
    return max(int(os.environ.get("AGENT_MEMORY_EXECUTOR_SHARDS") or "1"), 1)


async def get_executor_runtime() -> AgentRuntime | None:
    """The gRPC runtime at ``AGENT_MEMORY_RUNTIME`` (connected on first use), or ``None``: code runs here, sandboxed.

    With ``AGENT_MEMORY_RUNTIME_TLS``, it connects over mutual TLS with the deployment's certificates. An
    unreachable host raises :class:`~agent_memory.agents.RemoteExecutorUnavailable` (the chat says so); code never
    falls back to running in the UI process.
    """
    global _executor_runtime, _executor_lock
    address = os.environ.get("AGENT_MEMORY_RUNTIME")
    if not address:
        return None
    if _executor_lock is None:
        _executor_lock = asyncio.Lock()
    async with _executor_lock:
        if _executor_runtime is None:
            _executor_runtime = await connect_executor_runtime(address, tls=tls_from_env())
    return _executor_runtime


async def remote_agents(user_id: str, thread_id: str) -> RemoteAgentSession | None:
    """With ``AGENT_MEMORY_REMOTE_AGENTS`` (and ``AGENT_MEMORY_RUNTIME``), the session of (user, thread) on the
    session workers: the agents run there, and this process only shows their events. ``None``: they run here."""
    if os.environ.get("AGENT_MEMORY_REMOTE_AGENTS", "").lower() not in ("1", "true", "yes"):
        return None
    runtime = await get_executor_runtime()
    if runtime is None:
        raise RuntimeError("AGENT_MEMORY_REMOTE_AGENTS needs AGENT_MEMORY_RUNTIME, the host of the session workers")
    shards = max(int(os.environ.get("AGENT_MEMORY_SESSION_SHARDS") or "1"), 1)
    return RemoteAgentSession(runtime, user_id=user_id, thread_id=thread_id, shards=shards,
                              address=os.environ.get("AGENT_MEMORY_RUNTIME", ""))  # fmt: skip


class AgentMemoryDataLayer(ChainlitDataLayer):
    """Chainlit's own PostgreSQL data layer, plus: deleting a thread drops its saved agent contexts, and a step
    never moves to another thread.

    The thread's memories stay: they belong to the user (inspector, search) until deleted there. A chat message's
    step id comes from the client, and Chainlit upserts it (``ON CONFLICT (id) DO UPDATE``, thread included): a
    user who sent a message with the id of another user's step took that step into their own thread, text and
    all. A step of another thread is left as it is.
    """

    async def create_step(self, step_dict: Any) -> None:
        # Also the check of update_step, which Chainlit's layer implements as create_step (the same upsert).
        if await self._moves_a_step(step_dict):
            return
        await super().create_step(step_dict)

    async def _moves_a_step(self, step_dict: Any) -> bool:
        # A step that names no thread keeps its own (COALESCE in Chainlit's upsert) but still gets this content:
        # it must then be a step of this socket's thread.
        thread_id = step_dict.get("threadId") or _session_thread()
        found = await ThreadStore((await get_store()).db).step(str(step_dict.get("id")))
        if found is None or found[0] == thread_id:
            return False
        log.warning("refused to move step %s from thread %s to %s", step_dict.get("id"), found[0], thread_id)
        return True

    async def delete_thread(self, thread_id: str) -> None:
        threads = ThreadStore((await get_store()).db)
        owner = await threads.owner(thread_id)  # read first: the thread row is gone afterwards
        await super().delete_thread(thread_id)
        if owner is not None:
            await threads.delete_saved_contexts(thread_id, user_id=owner)


def _session_thread() -> str | None:
    """The thread of the chat session being served, if this runs in one."""
    try:
        return str(context.session.thread_id)
    except Exception:  # outside a Chainlit session (ChainlitContextException), e.g. an HTTP route
        return None
