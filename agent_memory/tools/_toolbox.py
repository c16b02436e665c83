"""The memory operations an agent or an MCP client may call: ONE implementation, two surfaces.

:class:`MemoryToolbox` binds a :class:`~agent_memory.store.MemoryStore` to one user (and optionally an
agent and a thread) at construction. Its methods are plain async functions with typed arguments and
Pydantic results; :mod:`agent_memory.tools` wraps them as AutoGen tools and :mod:`agent_memory.mcp`
as MCP tools. No method takes a user argument, so nothing a model writes can reach another user's memory.

Results are capped (``max_chars``) so one call never floods a context window; a capped result says so
(``truncated``) and tells how to get the rest (``hint``: a ``lines`` range, ``head``/``tail``, ``grep``).
Bad input raises :class:`MemoryToolError` (a ``ValueError``) with a message written for the caller.

Example:
    >>> import asyncio
    >>> from agent_memory import MemoryStore
    >>> from agent_memory.tools import MemoryToolbox
    >>> async def main() -> str:
    ...     async with await MemoryStore.open() as store:
    ...         tools = MemoryToolbox(store, "alice")
    ...         saved = await tools.store_memory("a\\nERROR disk full\\nb\\n", "df output", "command_output")
    ...         found = await tools.retrieve_memory(saved.key, grep="ERROR")
    ...         return found.content
    >>> asyncio.run(main())  # doctest: +SKIP
    '2:ERROR disk full'
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from ..errors import MemoryNotFound, PatternTooCostly
from ..models import MemoryItem
from ..placeholders import format_memory_ref
from ..store import MemoryStore, apply_transforms, compile_pattern, grep_off_loop, parse_line_range, split_lines
from ..validation import check_identifier, check_user_id
from ._editing import EditingTools
from ._errors import MemoryToolError, _check_key, _not_found

DEFAULT_MAX_CHARS = 16_000  # 4k (prose) to 7k (number-dense logs) tokens: readable, never a flood
HARD_MAX_CHARS = 200_000
DEFAULT_MAX_STORE_BYTES = 10 * 1024 * 1024  # bigger payloads belong to MemoryContext / the CLI, not a tool call
MAX_SEARCH_LIMIT = 50
MAX_LIST_LIMIT = 500
_THREAD_CHARS = 1_000_000  # transform big contents off the event loop


class MemorySummary(BaseModel):
    """One memory as a tool shows it: everything but the content, plus its placeholder."""

    key: str = Field(description="the memory key; pass it to retrieve_memory")
    description: str
    memory_type: str
    token_count: int = Field(description="tokens of the full content (tiktoken)")
    char_count: int
    created_at: datetime
    agent_id: str | None = None
    thread_id: str | None = None
    score: float | None = Field(default=None, description="search relevance, higher is better")
    why: dict[str, Any] | None = Field(
        default=None, description="search only: which rankers found it, each with its rank and evidence (0-1)"
    )
    lines: str | None = Field(
        default=None, description="search only: lines A-B of a long content where the words matched (lines=A-B)"
    )
    placeholder: str = Field(description="the [MemoryRef: ...] line that stands for this memory in a context")

    @classmethod
    def from_item(cls, item: MemoryItem) -> MemorySummary:
        return cls(
            key=item.memory_key, description=item.description, memory_type=item.memory_type,
            token_count=item.token_count, char_count=item.char_count, created_at=item.created_at,
            agent_id=item.agent_id, thread_id=item.thread_id, score=item.score, why=item.why,
            lines=item.matched_lines,
            placeholder=format_memory_ref(item.memory_key, item.description, item.token_count),
        )  # fmt: skip

    def line(self) -> str:
        score = f" score={self.score:.3f}" if self.score is not None else ""
        lines = f" matched lines={self.lines}" if self.lines else ""
        when = self.created_at.strftime("%Y-%m-%d %H:%M")
        return f"{self.placeholder} type={self.memory_type} created={when}{score}{lines}"


class RetrieveResult(BaseModel):
    """Content (or a view of it) of one memory."""

    key: str
    description: str
    memory_type: str
    total_tokens: int = Field(description="tokens of the full stored content")
    total_lines: int = Field(description="lines of the full stored content")
    total_chars: int
    view: str = Field(description="what was asked for: 'full', or the head/tail/lines/grep options applied")
    content: str = Field(description="the exact text of the view (grep lines are prefixed N: / N- like grep -n)")
    truncated: bool = Field(description="true when content was cut at max_chars")
    hint: str | None = Field(default=None, description="how to get more when truncated or when nothing matched")

    def render(self) -> str:
        size = f"{self.total_tokens} tokens, {self.total_lines} lines"
        parts = [f"[{self.key} - {self.description} - {size}; view: {self.view}]", self.content]
        if self.hint:
            parts.append(f"[{self.hint}]")
        return "\n".join(parts)


class SearchResult(BaseModel):
    """Memories matching a query, best first."""

    query: str
    results: list[MemorySummary]
    hint: str

    def render(self) -> str:
        if not self.results:
            return f"No memory matches {self.query!r}. {self.hint}"
        return "\n".join([*(r.line() for r in self.results), self.hint])


class StoreResult(BaseModel):
    """What was stored."""

    key: str
    placeholder: str = Field(description="put this line in the conversation instead of the content")
    token_count: int
    char_count: int
    memory_type: str

    def render(self) -> str:
        return f"Stored as {self.placeholder}"


class ListResult(BaseModel):
    """Memories, newest first."""

    memories: list[MemorySummary]
    returned: int
    limit: int
    more: bool = Field(description="true when more memories match than were returned")

    def render(self) -> str:
        if not self.memories:
            return "No memories match these filters."
        tail = f"\n[more exist: raise limit (max {MAX_LIST_LIMIT}) or narrow the filters]" if self.more else ""
        return "\n".join(m.line() for m in self.memories) + tail


class DeleteResult(BaseModel):
    key: str
    deleted: bool

    def render(self) -> str:
        return f"Deleted {self.key}."


class TypeStats(BaseModel):
    count: int
    tokens: int


class StatsResult(BaseModel):
    """Counts and tokens of the user's memories, by type."""

    total_memories: int
    total_tokens: int
    by_type: dict[str, TypeStats]

    def render(self) -> str:
        lines = [f"{t}: {s.count} memories, {s.tokens} tokens" for t, s in self.by_type.items()]
        lines.append(f"total: {self.total_memories} memories, {self.total_tokens} tokens")
        return "\n".join(lines)


def parse_since(since: str | datetime | None, *, now: datetime | None = None) -> datetime | None:
    """``None``, a datetime, an ISO date/time (naive means UTC), or a relative age: ``30m``, ``24h``, ``7d``, ``2w``.

    >>> parse_since("2026-01-31").isoformat()
    '2026-01-31T00:00:00+00:00'
    >>> now = datetime(2026, 2, 1, tzinfo=UTC)
    >>> parse_since("24h", now=now).isoformat()
    '2026-01-31T00:00:00+00:00'
    """
    if since is None:
        return None
    if isinstance(since, datetime):
        return since if since.tzinfo else since.replace(tzinfo=UTC)
    if not isinstance(since, str):
        raise MemoryToolError(f"since must be a string or a datetime, got {type(since).__name__}")
    text = since.strip()
    match = re.fullmatch(r"(\d{1,12})\s*([smhdw])", text)
    if match:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[match[2]]
        try:
            return (now or datetime.now(UTC)) - timedelta(**{unit: int(match[1])})
        except OverflowError:
            raise MemoryToolError(f"since={since!r} reaches back before the year 1: give a shorter age") from None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise MemoryToolError(
            f"since={since!r} is neither an ISO date/time (2026-01-31 or 2026-01-31T12:00:00Z) "
            "nor a relative age (30m, 24h, 7d, 2w)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _check_int(value: object, name: str, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MemoryToolError(f"{name} must be an integer, got {type(value).__name__}")
    if value < lo or (hi is not None and value > hi):
        raise MemoryToolError(f"{name} must be between {lo} and {hi}" if hi is not None else f"{name} must be >= {lo}")
    return value


class MemoryToolbox(EditingTools):
    """Memory operations bound to one user (and optionally one agent and thread).

    Args:
        store: an open :class:`MemoryStore`.
        user_id: the user every call acts for. Fixed for the toolbox's lifetime.
        agent_id, thread_id: recorded on memories stored through the toolbox.
        max_chars: default cap on the text one ``retrieve_memory`` returns (callers may ask for less or more,
            up to ``HARD_MAX_CHARS``).
        max_store_bytes: largest content ``store_memory`` accepts (UTF-8 bytes).
        source: recorded in stored memories' metadata (``{"source": ...}``), e.g. ``"tool"`` or ``"mcp"``.

    Example:
        >>> toolbox = MemoryToolbox(store, "alice", thread_id="t1")  # doctest: +SKIP
        >>> (await toolbox.search_memory("disk full")).results[0].key  # doctest: +SKIP
        'cmd_1a2b3c4d5e6f'
    """

    def __init__(
        self,
        store: MemoryStore,
        user_id: str,
        agent_id: str | None = None,
        thread_id: str | None = None,
        *,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_store_bytes: int = DEFAULT_MAX_STORE_BYTES,
        source: str = "tool",
    ) -> None:
        self.store = store
        self.user_id = check_user_id(user_id)
        self.agent_id = check_identifier(agent_id, "agent_id", optional=True)
        self.thread_id = check_identifier(thread_id, "thread_id", optional=True)
        self.max_chars = _check_int(max_chars, "max_chars", 100, HARD_MAX_CHARS)
        self.max_store_bytes = _check_int(max_store_bytes, "max_store_bytes", 1)
        self.source = source

    # ------------------------------------------------------------------ retrieve

    async def retrieve_memory(
        self,
        key: str,
        head: int | None = None,
        tail: int | None = None,
        lines: str | None = None,
        grep: str | None = None,
        context: int = 0,
        ignore_case: bool = False,
        max_chars: int | None = None,
    ) -> RetrieveResult:
        """The exact content of memory ``key``, or a view: ``lines`` range, then ``grep``, then ``head``/``tail``."""
        key = _check_key(key)
        for name, value in (("head", head), ("tail", tail)):
            if value is not None:
                _check_int(value, name, 0)
        _check_int(context, "context", 0, 100)
        cap = self.max_chars if max_chars is None else _check_int(max_chars, "max_chars", 100, HARD_MAX_CHARS)
        if lines is not None:
            if not isinstance(lines, str):
                raise MemoryToolError(f"lines must be a string such as '100-200', got {type(lines).__name__}")
            try:
                parse_line_range(lines)
            except ValueError as exc:
                raise MemoryToolError(str(exc)) from None
        if grep is not None:
            if not isinstance(grep, str) or not grep:
                raise MemoryToolError("grep must be a non-empty regular expression")
            try:
                compile_pattern(grep, ignore_case)
            except ValueError as exc:
                raise MemoryToolError(
                    f"{exc}. Escape special characters (e.g. \\( \\[ \\.) for a literal match."
                ) from None

        try:
            item = await self.store.get(key, user_id=self.user_id)
            full = await self.store.retrieve(key, user_id=self.user_id)
        except MemoryNotFound:
            raise _not_found(key) from None

        options: dict[str, Any] = {"head": head, "tail": tail, "lines": lines, "grep": grep}
        view_parts = [f"{k}={v!r}" for k, v in options.items() if v is not None]
        if grep is not None and context:
            view_parts.append(f"context={context}")
        if grep is not None and ignore_case:
            view_parts.append("ignore_case=True")
        view = ", ".join(view_parts) or "full"

        def compute() -> tuple[str, int]:
            text = apply_transforms(
                full, head=head, tail=tail, lines=lines, grep=grep, context=context, ignore_case=ignore_case
            )
            return text, len(split_lines(full))

        # grep runs in a thread even for small texts: a pathological pattern must not stall the event loop.
        try:
            if grep is not None:
                text, total_lines = await grep_off_loop(self.user_id, compute)
            elif len(full) > _THREAD_CHARS:
                text, total_lines = await asyncio.to_thread(compute)
            else:
                text, total_lines = compute()
        except PatternTooCostly as exc:
            raise MemoryToolError(str(exc)) from None

        truncated = len(text) > cap
        hint: str | None = None
        if truncated:
            text, hint = self._truncate(
                text, cap, head=head, tail=tail, lines=lines, grep=grep, total_lines=total_lines
            )
        elif grep is not None and not text:
            hint = f"no line matches {grep!r}" + ("" if ignore_case else "; try ignore_case=true or a broader pattern")
        return RetrieveResult(
            key=item.memory_key, description=item.description, memory_type=item.memory_type,
            total_tokens=item.token_count, total_lines=total_lines, total_chars=len(full), view=view,
            content=text, truncated=truncated, hint=hint,
        )  # fmt: skip

    @staticmethod
    def _truncate(
        text: str,
        cap: int,
        *,
        head: int | None,
        tail: int | None,
        lines: str | None,
        grep: str | None,
        total_lines: int,
    ) -> tuple[str, str]:
        cut = text[:cap]
        newline = cut.rfind("\n")
        if newline >= cap // 2:  # keep whole lines unless that loses too much
            cut = cut[: newline + 1]
        shown_lines = cut.count("\n")
        total = len(text)
        prefix = f"output truncated: showing {len(cut)} of {total} characters of this view"
        if grep is not None:
            return cut, (
                f"{prefix}. Narrow the grep pattern, lower context, add lines='A-B', or use head/tail on the matches."
            )
        if head is None and tail is None:
            start = parse_line_range(lines)[0] if lines is not None else 1
            end_shown = start + max(shown_lines, 1) - 1
            nxt = end_shown + 1 if shown_lines else start
            return cut, (
                f"{prefix} (lines {start}-{end_shown} of {total_lines}). Continue with lines='{nxt}-{nxt + 199}', "
                "or use grep='pattern' to find specific lines, head/tail for the ends."
            )
        return cut, f"{prefix}. Ask for fewer lines (smaller head/tail) or use lines='A-B' / grep='pattern'."

    # ------------------------------------------------------------------ search / list

    async def search_memory(self, query: str, limit: int = 5, memory_type: str | None = None) -> SearchResult:
        """The user's memories best matching ``query`` (words, identifiers, phrases), best first."""
        if not isinstance(query, str):
            raise MemoryToolError(f"query must be a string, got {type(query).__name__}")
        if not query.strip():
            raise MemoryToolError("query is empty: give words or identifiers to look for")
        limit = _check_int(limit, "limit", 1, MAX_SEARCH_LIMIT)
        try:
            items = await self.store.search(query, user_id=self.user_id, limit=limit, memory_type=memory_type)
        except ValueError as exc:
            raise MemoryToolError(str(exc)) from None
        return SearchResult(
            query=query,
            results=[MemorySummary.from_item(i) for i in items],
            hint="Use retrieve_memory(key, grep=..., lines=...) to read a result."
            if items
            else "Try other words, an identifier from the conversation, or list_memories.",
        )

    async def list_memories(
        self,
        memory_type: str | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        since: str | datetime | None = None,
        limit: int = 20,
    ) -> ListResult:
        """The user's memories, newest first, filtered by type, thread, agent and creation time."""
        limit = _check_int(limit, "limit", 1, MAX_LIST_LIMIT)
        since_dt = parse_since(since)
        try:
            items = await self.store.list(
                user_id=self.user_id, memory_type=memory_type, thread_id=thread_id, agent_id=agent_id,
                since=since_dt, limit=limit + 1,
            )  # fmt: skip
        except ValueError as exc:
            raise MemoryToolError(str(exc)) from None
        shown = items[:limit]
        return ListResult(
            memories=[MemorySummary.from_item(i) for i in shown], returned=len(shown), limit=limit,
            more=len(items) > limit,
        )  # fmt: skip

    # ------------------------------------------------------------------ write

    async def store_memory(self, content: str, description: str, memory_type: str = "note") -> StoreResult:
        """Store ``content`` exactly; returns its key and the placeholder that stands for it."""
        if not isinstance(content, str):
            raise MemoryToolError(f"content must be a string, got {type(content).__name__}")
        if not content:
            raise MemoryToolError("content is empty: there is nothing to store")
        if not isinstance(description, str) or not description.strip():
            raise MemoryToolError("description must be a short non-empty text saying what the content is")
        size = len(content.encode("utf-8", errors="surrogatepass"))
        if size > self.max_store_bytes:
            raise MemoryToolError(
                f"content is {size} bytes; this tool stores at most {self.max_store_bytes} bytes per call. "
                "Store big outputs with `agent-memory store FILE` or let MemoryContext offload them."
            )
        try:
            key = await self.store.store(
                content, user_id=self.user_id, description=description, memory_type=memory_type,
                agent_id=self.agent_id, thread_id=self.thread_id, metadata={"source": self.source},
                actor=self._actor, surface=self._surface,
            )  # fmt: skip
            item = await self.store.get(key, user_id=self.user_id)
        except ValueError as exc:
            raise MemoryToolError(str(exc)) from None
        return StoreResult(
            key=key, placeholder=format_memory_ref(key, item.description, item.token_count),
            token_count=item.token_count, char_count=item.char_count, memory_type=item.memory_type,
        )  # fmt: skip

    async def delete_memory(self, key: str) -> DeleteResult:
        """Delete memory ``key`` for good."""
        key = _check_key(key)
        try:
            await self.store.delete(key, user_id=self.user_id, actor=self._actor, surface=self._surface)
        except MemoryNotFound:
            raise _not_found(key) from None
        return DeleteResult(key=key, deleted=True)

    async def memory_stats(self) -> StatsResult:
        """How many memories and tokens the user has, by type."""
        stats = await self.store.stats(user_id=self.user_id)
        return StatsResult(
            total_memories=stats.total_memories,
            total_tokens=stats.total_tokens,
            by_type={t: TypeStats(count=v["count"], tokens=v["tokens"]) for t, v in stats.by_type.items()},
        )

    async def read_memory(self, key: str) -> str:
        """The full exact content (for MCP resources, which clients read as a document; no cap)."""
        try:
            return await self.store.retrieve(_check_key(key), user_id=self.user_id)
        except MemoryNotFound:
            raise _not_found(key) from None
