"""MCP server over the memory store (official ``mcp`` SDK, FastMCP): diagnosis and agent tooling.

Tools: ``store_memory``, ``retrieve_memory``, ``search_memory``, ``list_memories``, ``delete_memory``,
``memory_stats``: the same :class:`~agent_memory.tools.MemoryToolbox` methods the AutoGen agents use.
Each tool has a typed input schema and structured output (an output schema plus ``structuredContent``);
its text content is the compact rendering a model reads best. Resources: every memory is
``memory://<key>`` (``resources/list`` lists the user's newest memories; the template reads any of them).

Scoping: a server built with ``user_id=`` (stdio) serves exactly that user. A server built with
``token_verifier=`` (streamable HTTP) serves the user of the bearer token on *each* HTTP request: the SDK's
bearer middleware answers 401 to a missing or bad token, and the tools read the user from the verified
token attached to the request that carried the call. No tool takes a user argument.

Example:
    >>> import asyncio
    >>> from agent_memory import MemoryStore
    >>> from agent_memory.mcp import create_server
    >>> async def main() -> None:
    ...     async with await MemoryStore.open() as store:
    ...         await create_server(store, user_id="alice").run_stdio_async()
    >>> asyncio.run(main())  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types import Resource as MCPResource
from pydantic import BaseModel, Field
from starlette.middleware import Middleware

from ..auth import StoreTokenVerifier, TokenManager
from ..errors import DatabaseUnavailable
from ..placeholders import clean_description
from ..store import MemoryStore
from ..tools import (
    MAX_LIST_LIMIT,
    MAX_SEARCH_LIMIT,
    DeleteResult,
    HistoryResult,
    ListResult,
    MemoryToolbox,
    RetractResult,
    RetrieveResult,
    SearchResult,
    StatsResult,
    StoreResult,
    UpdateResult,
)
from ..validation import check_user_id
from ._bodies import Utf8BodyGuard
from ._faults import DatabaseFaultGuard, answer_server_error
from ._limits import PerUserSessionCap, SessionLimits
from ._skills import register_skill_tools

SERVER_NAME = "agent-memory"
MAX_LISTED_RESOURCES = 500
HTTP_MAX_REQUEST_BYTES = 32 * 1024 * 1024

INSTRUCTIONS = (
    "Long-term memory of one user: exact stored texts (command outputs, notes, preferences, facts), each with "
    "a key. In conversations a stored text appears as [MemoryRef: <key> - <description> - <N> tokens]. Use "
    "search_memory to find memories, retrieve_memory with grep / lines / head / tail to read only what you "
    "need, store_memory to keep something. Every tool acts for the authenticated user only."
)

_log = logging.getLogger(__name__)
R = TypeVar("R", bound=BaseModel)


class MemoryMCP(FastMCP[Any]):
    """FastMCP whose ``resources/list`` lists the current user's memories (FastMCP's own list is static)."""

    def __init__(self, store: MemoryStore, *, user_id: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store = store
        self.fixed_user = check_user_id(user_id) if user_id is not None else None

    def current_user(self, ctx: Context[Any, Any, Any] | None = None) -> str:
        """The user this request acts for: the stdio user, or the subject of this HTTP request's token."""
        if self.fixed_user is not None:
            return self.fixed_user
        ctx = ctx or self.get_context()
        request = None
        with contextlib.suppress(ValueError):
            request = ctx.request_context.request
        # The HTTP request that carried this very message (not a contextvar of the session's first request).
        auth_user = getattr(request, "scope", {}).get("user") if request is not None else None
        if isinstance(auth_user, AuthenticatedUser) and auth_user.access_token.subject:
            return auth_user.access_token.subject
        token = get_access_token()
        if token is not None and token.subject:
            return token.subject
        raise ToolError("not authenticated: this server needs a bearer token (agent-memory token create)")

    def toolbox(self, ctx: Context[Any, Any, Any] | None = None) -> MemoryToolbox:
        return MemoryToolbox(self.store, self.current_user(ctx), source="mcp")

    async def list_resources(self) -> list[MCPResource]:
        items = await self.store.list(user_id=self.current_user(), limit=MAX_LISTED_RESOURCES)
        return [
            MCPResource(
                uri=f"memory://{i.memory_key}",  # type: ignore[arg-type]  # pydantic parses the string
                name=i.memory_key,
                title=clean_description(i.description),
                description=f"{i.memory_type}, {i.token_count} tokens, created {i.created_at:%Y-%m-%d %H:%M}",
                mimeType="text/plain",
            )
            for i in items
        ]


def _result(model: R) -> CallToolResult:
    """Structured output plus the compact text rendering as content."""
    render: Callable[[], str] = model.render  # type: ignore[attr-defined]
    return CallToolResult(
        content=[TextContent(type="text", text=render())], structuredContent=model.model_dump(mode="json")
    )


async def _call(fn: Awaitable[R]) -> CallToolResult:
    try:
        return _result(await fn)
    except (ValueError, DatabaseUnavailable) as exc:  # bad input, or the database's fault: the message as is
        raise ToolError(str(exc)) from None
    except Exception as exc:  # a bug or an unexpected database error: its text names tables and constraints
        reference = uuid.uuid4().hex[:12]
        _log.exception("MCP tool call failed (reference %s)", reference)
        raise ToolError(
            f"the server failed on this call ({type(exc).__name__}); its log has the details under reference "
            f"{reference}"
        ) from None


def create_server(
    store: MemoryStore,
    *,
    user_id: str | None = None,
    token_verifier: StoreTokenVerifier | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    **settings: Any,
) -> MemoryMCP:
    """The agent-memory MCP server for one user (``user_id``) or for token-authenticated users (HTTP).

    Exactly one of ``user_id`` and ``token_verifier`` must be given.
    """
    if (user_id is None) == (token_verifier is None):
        raise ValueError("give exactly one of user_id (stdio, one user) or token_verifier (HTTP, bearer tokens)")
    auth = (
        AuthSettings(issuer_url=f"http://{host}:{port}", resource_server_url=None)  # type: ignore[arg-type]
        if token_verifier is not None
        else None
    )
    mcp = MemoryMCP(
        store,
        user_id=user_id,
        name=SERVER_NAME,
        instructions=INSTRUCTIONS,
        token_verifier=token_verifier,
        auth=auth,
        host=host,
        port=port,
        **settings,
    )
    read_only = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

    @mcp.tool(
        title="Read a stored memory",
        annotations=read_only,
        description=(
            "Read a stored memory by key (the <key> in [MemoryRef: <key> - <description> - <N> tokens]). Prefer a "
            "view over the full text: grep='regex' returns matching lines as 'N:line' (context=K adds K lines "
            "around each match), lines='100-200' a 1-based line range, head=N / tail=N the first / last N lines. "
            "Options apply in the order lines, grep, head/tail. Output longer than max_chars is cut; the result "
            "then says truncated=true and how to read on."
        ),
    )
    async def retrieve_memory(
        key: Annotated[str, Field(description="memory key, e.g. cmd_1a2b3c4d5e6f")],
        ctx: Context[Any, Any, Any],
        grep: Annotated[
            str | None, Field(description="regular expression (Python syntax); only matching lines")
        ] = None,
        lines: Annotated[
            str | None, Field(description="1-based inclusive line range START-END, e.g. '100-200'")
        ] = None,
        head: Annotated[int | None, Field(description="only the first N lines", ge=0)] = None,
        tail: Annotated[int | None, Field(description="only the last N lines", ge=0)] = None,
        context: Annotated[int, Field(description="lines of context around each grep match", ge=0, le=100)] = 0,
        ignore_case: Annotated[bool, Field(description="case-insensitive grep")] = False,
        max_chars: Annotated[
            int | None, Field(description="cap on returned characters (default 16000)", ge=100, le=200_000)
        ] = None,
    ) -> Annotated[CallToolResult, RetrieveResult]:
        return await _call(
            mcp.toolbox(ctx).retrieve_memory(
                key, head=head, tail=tail, lines=lines, grep=grep, context=context, ignore_case=ignore_case,
                max_chars=max_chars,
            )
        )  # fmt: skip

    @mcp.tool(
        title="Search memories",
        annotations=read_only,
        description=(
            "Search the user's memories by words, identifiers or error text; best first, with keys, descriptions, "
            "sizes and scores. Read a hit with retrieve_memory."
        ),
    )
    async def search_memory(
        query: Annotated[str, Field(description="words, identifiers or error text to look for")],
        ctx: Context[Any, Any, Any],
        limit: Annotated[int, Field(description="number of results", ge=1, le=MAX_SEARCH_LIMIT)] = 5,
        memory_type: Annotated[str | None, Field(description="only this type, e.g. command_output")] = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        return await _call(mcp.toolbox(ctx).search_memory(query, limit=limit, memory_type=memory_type))

    @mcp.tool(
        title="Store a memory",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False),
        description=(
            "Store a text exactly in the user's long-term memory. Returns its key and the [MemoryRef: ...] "
            "placeholder to cite instead of the text. Content is limited to 10 MB per call."
        ),
    )
    async def store_memory(
        content: Annotated[str, Field(description="the exact text to keep")],
        description: Annotated[str, Field(description="short description shown in the placeholder")],
        ctx: Context[Any, Any, Any],
        memory_type: Annotated[
            str, Field(description="note, user_preference, user_fact, lesson, command_output, ...", max_length=50)
        ] = "note",
    ) -> Annotated[CallToolResult, StoreResult]:
        return await _call(mcp.toolbox(ctx).store_memory(content, description, memory_type))

    @mcp.tool(
        title="List memories",
        annotations=read_only,
        description=(
            "List the user's memories, newest first. Filters: memory_type, thread_id, agent_id, and since (an ISO "
            "date/time such as 2026-01-31T12:00:00Z, or an age such as 30m, 24h, 7d)."
        ),
    )
    async def list_memories(
        ctx: Context[Any, Any, Any],
        memory_type: Annotated[str | None, Field(description="only this memory type")] = None,
        thread_id: Annotated[str | None, Field(description="only memories of this thread")] = None,
        agent_id: Annotated[str | None, Field(description="only memories of this agent")] = None,
        since: Annotated[str | None, Field(description="only created since: ISO date/time or age (24h, 7d)")] = None,
        limit: Annotated[int, Field(description="maximum number of memories", ge=1, le=MAX_LIST_LIMIT)] = 20,
    ) -> Annotated[CallToolResult, ListResult]:
        return await _call(
            mcp.toolbox(ctx).list_memories(
                memory_type=memory_type, thread_id=thread_id, agent_id=agent_id, since=since, limit=limit
            )
        )

    @mcp.tool(
        title="Delete a memory",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False),
        description="Delete one of the user's memories for good, by key.",
    )
    async def delete_memory(
        key: Annotated[str, Field(description="memory key to delete")], ctx: Context[Any, Any, Any]
    ) -> Annotated[CallToolResult, DeleteResult]:
        return await _call(mcp.toolbox(ctx).delete_memory(key))

    @mcp.tool(
        title="Correct a memory",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False),
        description=(
            "Correct one of the user's memories in place (new content and/or description). The key stays; the "
            "previous version is kept and listed by memory_history. Every change is audited."
        ),
    )
    async def update_memory(
        key: Annotated[str, Field(description="memory key to correct")],
        ctx: Context[Any, Any, Any],
        content: Annotated[str | None, Field(description="the corrected text (omit to keep it)")] = None,
        description: Annotated[str | None, Field(description="the corrected description (omit to keep it)")] = None,
    ) -> Annotated[CallToolResult, UpdateResult]:
        return await _call(mcp.toolbox(ctx).update_memory(key, content=content, description=description))

    @mcp.tool(
        title="History of a memory",
        annotations=read_only,
        description="Every version of one memory (who, when, through which surface) and its status.",
    )
    async def memory_history(
        key: Annotated[str, Field(description="memory key")], ctx: Context[Any, Any, Any]
    ) -> Annotated[CallToolResult, HistoryResult]:
        return await _call(mcp.toolbox(ctx).memory_history(key))

    @mcp.tool(
        title="Retract a memory",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True),
        description=(
            "Retract one of the user's memories that is wrong or no longer true: it leaves search and the user's "
            "standing facts but stays retrievable by key, marked retracted with the reason."
        ),
    )
    async def retract_memory(
        key: Annotated[str, Field(description="memory key to retract")],
        reason: Annotated[str, Field(description="why it is retracted", min_length=1, max_length=2000)],
        ctx: Context[Any, Any, Any],
    ) -> Annotated[CallToolResult, RetractResult]:
        return await _call(mcp.toolbox(ctx).retract_memory(key, reason))

    @mcp.tool(
        title="Memory statistics",
        annotations=read_only,
        description="How many memories and stored tokens the user has, in total and by memory type.",
    )
    async def memory_stats(ctx: Context[Any, Any, Any]) -> Annotated[CallToolResult, StatsResult]:
        return await _call(mcp.toolbox(ctx).memory_stats())

    @mcp.resource(
        "memory://{key}",
        name="memory",
        title="Stored memory",
        description="The exact content of one memory of the user, by key.",
        mime_type="text/plain",
    )
    async def memory_resource(key: str, ctx: Context[Any, Any, Any]) -> str:
        return await mcp.toolbox(ctx).read_memory(key)

    register_skill_tools(mcp)  # skill tools (mcp/_skills.py) when AGENT_MEMORY_SKILLS_ENABLED
    return mcp


class SessionEndFilter(logging.Filter):
    """Drops the SDK's error report for a client that ends its session normally.

    When a client closes its session (``DELETE /mcp``), the SDK's stream for server-initiated messages is
    already closed when its writer next wakes, and it logs that as ``Error in standalone SSE writer`` with a
    full traceback: one alarming error per session in every server log. Other errors pass unchanged.
    """

    MESSAGE = "Error in standalone SSE writer"

    def filter(self, record: logging.LogRecord) -> bool:
        closed = record.exc_info is not None and isinstance(
            record.exc_info[1], (anyio.ClosedResourceError, anyio.BrokenResourceError)
        )
        return not (closed and record.getMessage() == self.MESSAGE)


def quiet_normal_session_ends() -> None:
    """Install :class:`SessionEndFilter` on the SDK's streamable-HTTP logger (idempotent)."""
    logger = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, SessionEndFilter) for f in logger.filters):
        logger.addFilter(SessionEndFilter())


def create_http_server(store: MemoryStore, *, host: str = "127.0.0.1", port: int = 8000, **settings: Any) -> MemoryMCP:
    """A streamable-HTTP server whose users are those of the bearer tokens in the store's database."""
    # Room for a 10 MB store_memory call after JSON escaping, so oversize content gets the tool's clear error
    # rather than the transport's bare 413 (the SDK default is 4 MiB).
    settings.setdefault("max_request_body_size", HTTP_MAX_REQUEST_BYTES)
    quiet_normal_session_ends()
    return create_server(
        store, token_verifier=StoreTokenVerifier(TokenManager(store.db)), host=host, port=port, **settings
    )


async def serve_http(store: MemoryStore, host: str, port: int, *, log_level: str = "info") -> None:
    """Run the streamable-HTTP server (endpoint ``/mcp``) until cancelled."""
    import uvicorn

    limits = SessionLimits.from_env(os.environ)
    mcp = create_http_server(store, host=host, port=port, session_idle_timeout=limits.idle_seconds)
    # The SDK's own cap (10,000) is for the whole server: one user must not be able to take every session.
    starlette_app = mcp.streamable_http_app()
    starlette_app.add_exception_handler(Exception, answer_server_error)
    # appended: innermost, so it runs after authentication has set the request's user
    starlette_app.user_middleware.append(Middleware(Utf8BodyGuard, max_bytes=HTTP_MAX_REQUEST_BYTES))
    app = PerUserSessionCap(
        starlette_app,
        owners=lambda: mcp.session_manager._session_owners,  # the SDK's record of who opened each session
        verifier=StoreTokenVerifier(TokenManager(store.db)),
        limit=limits.per_user,
    )
    server = uvicorn.Server(
        uvicorn.Config(DatabaseFaultGuard(app), host=host, port=port, log_level=log_level, lifespan="on")
    )
    await server.serve()
