"""Memory inspector: a page at ``/memories`` and JSON routes under ``/memory-api`` on Chainlit's server.

Every route resolves the user from Chainlit's signed session token (cookie or bearer header) through
``chainlit.auth.get_current_user``; nothing in the request names a user. The store filters every read by
that user in SQL, so another user's key answers 404 exactly like a missing one.

Routes:
    GET    /memories                               the inspector page (its data comes from the routes below)
    GET    /memory-api/memories?q=&type=&thread=   list (newest first) or search (best first)
    GET    /memory-api/memories/{key}              one memory's facts, no content
    GET    /memory-api/memories/{key}/content      the exact content, text/plain (fetched on click)
    DELETE /memory-api/memories/{key}              delete it
    GET    /memory-api/threads/{thread_id}/stats   tokens memory kept out of the context in that thread
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from chainlit.auth import get_current_user
from chainlit.user import User
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from agent_memory import MemoryItem, MemoryNotFound
from agent_memory.placeholders import format_memory_ref
from agent_memory.tokens import count_tokens

from .runtime import get_store

router = APIRouter()
_PAGE = Path(__file__).with_name("inspector.html")


async def current_identifier(user: Annotated[User | None, Depends(get_current_user)]) -> str:
    """The logged-in user's identifier, from the verified session token only."""
    if user is None:
        raise HTTPException(status_code=401, detail="log in first")
    return str(user.identifier)


Identifier = Annotated[str, Depends(current_identifier)]


def item_json(item: MemoryItem) -> dict[str, Any]:
    return {
        "key": item.memory_key,
        "type": item.memory_type,
        "description": item.description,
        "tokens": item.token_count,
        "chars": item.char_count,
        "created_at": item.created_at.isoformat(),
        "thread_id": item.thread_id,
        "agent_id": item.agent_id,
        "score": item.score,
        "access_count": item.access_count,
        "metadata": item.metadata,
        "version": item.version,
        "status": item.status,
        "status_reason": item.status_reason,
        "subject": item.subject,
        "valid_until": item.valid_until.isoformat() if item.valid_until else None,
        "why": item.why,
    }


@router.get("/memories", include_in_schema=False)
async def inspector_page() -> HTMLResponse:
    return HTMLResponse(_PAGE.read_text(encoding="utf-8"))


@router.get("/memory-api/memories")
async def list_memories(
    user: Identifier,
    q: str = "",
    type: str | None = None,
    thread: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    store = await get_store()
    try:
        if q.strip():
            items = await store.search(q, user_id=user, limit=min(limit, 100), memory_type=type or None)
        else:
            items = await store.list(user_id=user, memory_type=type or None, thread_id=thread or None, limit=limit)
    except ValueError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    return {"user": user, "query": q, "memories": [item_json(i) for i in items]}


@router.get("/memory-api/memories/{key}")
async def get_memory(key: str, user: Identifier) -> dict[str, Any]:
    try:
        item = await (await get_store()).get(key, user_id=user)
    except MemoryNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    return item_json(item)


@router.get("/memory-api/memories/{key}/history")
async def get_history(key: str, user: Identifier) -> dict[str, Any]:
    store = await get_store()
    try:
        versions = await store.history(key, user_id=user)
    except MemoryNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    audit = await store.audit_log(user_id=user, key=key)
    return {
        "key": key,
        "versions": [v.model_dump(mode="json") for v in versions],
        "audit": [e.model_dump(mode="json") for e in audit],
    }


@router.get("/memory-api/memories/{key}/content")
async def get_content(key: str, user: Identifier, download: bool = False) -> Response:
    try:
        text = await (await get_store()).retrieve(key, user_id=user)
    except MemoryNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    if download:
        headers["Content-Disposition"] = f'attachment; filename="{key}.txt"'
    return PlainTextResponse(text, headers=headers)


@router.delete("/memory-api/memories/{key}")
async def delete_memory(key: str, user: Identifier) -> dict[str, Any]:
    try:
        await (await get_store()).delete(key, user_id=user, actor=user, surface="ui")
    except MemoryNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    return {"deleted": key}


async def thread_token_stats(user: str, thread_id: str) -> dict[str, int]:
    """How much memory kept out of the model's context in one thread of ``user``.

    ``stored_tokens`` is what the thread's memories hold; the context carries only their placeholders, so
    ``kept_out_tokens`` = stored tokens minus placeholder tokens (never negative per memory).
    """
    items = await (await get_store()).list(user_id=user, thread_id=thread_id, limit=10_000)
    stored = placeholders = kept_out = 0
    for item in items:
        ref_tokens = count_tokens(format_memory_ref(item.memory_key, item.description, item.token_count))
        stored += item.token_count
        placeholders += ref_tokens
        kept_out += max(0, item.token_count - ref_tokens)
    return {
        "memories": len(items),
        "stored_tokens": stored,
        "placeholder_tokens": placeholders,
        "kept_out_tokens": kept_out,
    }


@router.get("/memory-api/threads/{thread_id}/stats")
async def thread_stats(thread_id: str, user: Identifier) -> dict[str, Any]:
    try:
        stats = await thread_token_stats(user, thread_id)
    except ValueError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    return {"thread_id": thread_id, **stats}


def mount(app: FastAPI) -> None:
    """Put the inspector routes in front of Chainlit's catch-all ``GET /{path}`` (idempotent)."""

    def ident(route: Any) -> tuple[Any, Any]:
        return getattr(route, "path", None), frozenset(getattr(route, "methods", None) or ())

    present = {ident(r) for r in app.router.routes}
    for route in reversed(router.routes):
        if ident(route) not in present:
            app.router.routes.insert(0, route)
