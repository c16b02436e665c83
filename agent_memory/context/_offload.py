"""The one offloader: how big content leaves a conversation for the store, and what stays in its place.

Both :class:`~agent_memory.context.MemoryContext` (every big piece of a message) and the executor agent
(a big command output) go through :class:`Offloader`, so there is one description (:func:`describe`, or a
model's one-liner), one excerpt (:func:`excerpt`), one placeholder (``format_memory_ref``) and one answer to
"the database is down": the exact content stays inline (``pending_content``) and is stored later
(:meth:`Offloader.store_pending`). Content the store refuses (over its size limit, lone surrogates) is not
offloaded: the caller gets a :class:`Refused` that says why, and keeps the content inline, never altered
(MemoryContext) or posts the excerpt and the reason (the executor).

Cost: one token count (the store is handed it, never counts again), one analysis pass shared by the
description and both excerpts, one INSERT (benchmarks/RESULTS.md has the figures against that floor).

Example:
    >>> part = OffloadedPart(slot=0, key="cmd_0123456789ab", tokens=900, description="pytest (80 lines)",
    ...                      excerpt="collected 80 items\\n… [78 lines omitted] …\\nexit code: 1",
    ...                      memory_type="command_output", compacted=True)
    >>> print(part_text(part, compact=True))
    [MemoryRef: cmd_0123456789ab - pytest (80 lines) - 900 tokens]
    collected 80 items
    … [78 lines omitted] …
    exit code: 1
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Required, TypedDict, Unpack

import asyncpg
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)

from ..errors import DatabaseUnavailable
from ..placeholders import format_memory_ref
from ..store import MemoryStore
from ..tokens import count_tokens
from ._compaction import TextFacts, analyze, describe, excerpt, llm_description, message_identifiers, printable
from ._state import ContextEntry, OffloadedPart

log = logging.getLogger(__name__)

# Failures that mean "the database is not reachable right now": content stays inline (pending) and is
# offloaded later. Anything else (a bug, content the store refuses) is not swallowed silently.
DB_UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.OperatorInterventionError,
    DatabaseUnavailable,
)

COMMAND_TOOL_RE = re.compile(r"(exec|shell|bash|command|run_code|python|terminal|code_execution|cmd|script)", re.I)
# Above this size counting and analysing move off the event loop (~15 ms of work per 200 KB).
_THREAD_CHARS = 200_000


def _count_and_analyze(text: str) -> tuple[int, TextFacts]:
    return count_tokens(text), analyze(text)


class Piece(TypedDict, total=False):
    """What a caller tells the offloader about a text: recorded with it and used in its description."""

    memory_type: Required[str]
    metadata: Mapping[str, Any] | None
    slot: int  # the position of the text in its message (a context entry's part refers to it)
    kind: str | None  # where it came from, when not a tool: "user paste", "bash: seq 1 3000"...
    tool_name: str | None
    arguments: Any  # the tool call's arguments (recorded, and named in the description)


@dataclass(frozen=True)
class Refused:
    """Content above the threshold that the store refuses to keep exactly (over its size limit, lone surrogates).

    ``part`` describes it as an offload would have (tokens, description, excerpt; no key); ``error`` says why.
    """

    part: OffloadedPart
    error: ValueError

    @property
    def reason(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"


@dataclass(kw_only=True)
class Offloader:
    """Stores big texts for one user (and agent/thread) and describes what stays in their place.

    Args:
        get_store: returns the store (a context opens its store on first use).
        threshold_tokens: texts above this many tokens are offloaded (0: every non-empty text handed in, for a
            caller that decides by another measure, such as characters).
        excerpt_max_tokens: size of the excerpt kept with the placeholder.
        first_use_max_tokens: size of the first-use view (the full text when it fits, else a larger
            excerpt); 0: no first-use view.
        model_client, llm_timeout_seconds: optional model for one-line descriptions (falls back to the
            deterministic one on any failure).
        offloaded_by: recorded in the metadata of every stored item.
    """

    get_store: Callable[[], Awaitable[MemoryStore]] = field(kw_only=False)
    user_id: str
    agent_id: str | None
    thread_id: str | None
    threshold_tokens: int
    excerpt_max_tokens: int
    first_use_max_tokens: int = 0
    model_client: ChatCompletionClient | None = None
    llm_timeout_seconds: float = 10.0
    offloaded_by: str

    async def offload(self, text: str, **piece: Unpack[Piece]) -> OffloadedPart | Refused | None:
        """Store ``text`` when it is above the threshold: :meth:`prepare`, then :meth:`store`.

        ``None``: small, it stays inline. The part has no ``key`` (``pending_content`` holds the text) when the
        database is unreachable. Other storage errors propagate.
        """
        part = await self.prepare(text, **piece)
        return None if part is None else await self.store(text, part)

    async def prepare(self, text: str, **piece: Unpack[Piece]) -> OffloadedPart | None:
        """The part that will describe ``text`` once stored (no key yet); ``None`` when not above the threshold.

        A caller that must survive any storage error (the executor) prepares first, so it has the excerpt to show.
        """
        memory_type, kind, tool_name = piece["memory_type"], piece.get("kind"), piece.get("tool_name")
        arguments = piece.get("arguments")
        threshold = self.threshold_tokens
        # A token is at least one UTF-8 byte and a character at most four: short texts need no count.
        if len(text) * 4 <= threshold:
            return None
        if len(text) > _THREAD_CHARS:
            # A big output is counted and analysed off the event loop (other sessions keep running). One thread,
            # one after the other: tiktoken holds the GIL, so two threads would only contend for it.
            tokens, facts = await asyncio.to_thread(_count_and_analyze, text)
        else:
            tokens = count_tokens(text)
            if tokens <= threshold:
                return None
            facts = analyze(text)
        if tokens <= threshold:
            return None
        # No token count in the description: the placeholder carries it.
        args_for_description = arguments if isinstance(arguments, (dict, str)) else None
        description = describe(text, tool_name=tool_name, arguments=args_for_description, kind=kind, facts=facts)
        if self.model_client is not None:
            description = await llm_description(
                self.model_client,
                text,
                fallback=description,
                hint=f"Source: {tool_name or kind or memory_type}",
                timeout_seconds=self.llm_timeout_seconds,
            )
        description = printable(description)
        meta = dict(piece.get("metadata") or {})
        meta.update(
            agent_id=self.agent_id,
            thread_id=self.thread_id,
            stored_at=datetime.now(UTC).isoformat(),
            offloaded_by=self.offloaded_by,
        )
        short, first_use, first_use_is_full = self._views(text, tokens, facts)
        part = OffloadedPart(
            slot=piece.get("slot", 0),
            tokens=tokens,
            description=description,
            excerpt=short,
            memory_type=memory_type,
            metadata=meta,
            first_use=first_use,
            first_use_is_full=first_use_is_full,
            # Cheap local identifiers; the content itself is matched in SQL when a user message arrives.
            identifiers=sorted(
                message_identifiers(f"{description}\n{json.dumps(arguments, default=str) if arguments else ''}")
            ),
        )
        return part

    async def store(self, text: str, part: OffloadedPart) -> OffloadedPart | Refused:
        """Store ``text`` described by ``part`` (from :meth:`prepare`); the part with its key, or kept pending.

        Database unreachable: the part keeps the exact text (``pending_content``, no key) until
        :meth:`store_pending`. Refused by the store: :class:`Refused` (never altered to fit). Other errors
        propagate.
        """
        try:
            part.key = await self._store(text, part)
        except DB_UNAVAILABLE_ERRORS as exc:
            log.warning("database unreachable (%s): keeping %d tokens inline until it is back", exc, part.tokens)
            part.pending_content = text
        except ValueError as exc:
            # The store refuses what it cannot keep exactly (lone surrogates, over the size limit).
            log.warning("the store refused %d tokens: %s", part.tokens, exc)
            return Refused(part, exc)
        return part

    async def store_pending(self, part: OffloadedPart) -> None:
        """Store a part kept inline while the database was down (raises the database's errors meanwhile)."""
        if part.key is not None or part.pending_content is None:
            return
        part.key = await self._store(part.pending_content, part)
        part.pending_content = None

    def _views(self, text: str, tokens: int, facts: TextFacts) -> tuple[str, str | None, bool]:
        """(excerpt, first-use view, whether the first-use view is the full text)."""
        short = excerpt(text, max_tokens=self.excerpt_max_tokens, facts=facts)
        cap = self.first_use_max_tokens
        if cap <= 0:
            return short, None, False
        fits = tokens <= cap
        return short, text if fits else excerpt(text, max_tokens=cap, facts=facts), fits

    async def _store(self, text: str, part: OffloadedPart) -> str:
        store = await self.get_store()
        return await store.store(
            text,
            user_id=self.user_id,
            description=part.description,
            memory_type=part.memory_type,
            agent_id=self.agent_id,
            thread_id=self.thread_id,
            metadata=part.metadata,
            token_count=part.tokens,
            actor=self.agent_id,
            surface="agent",
        )


def part_text(part: OffloadedPart, compact: bool) -> str:
    """What the model sees in place of an offloaded piece: its first-use view, or placeholder + excerpt."""
    if part.key is None:  # pending: the exact content, inline, until the database is back
        return part.pending_content or ""
    ref = format_memory_ref(part.key, part.description, part.tokens)
    if not compact and not part.compacted and part.first_use is not None:
        if part.first_use_is_full:
            note = "(shown in full this time; later turns show only the reference and an excerpt)"
            return f"{ref} {note}\n{part.first_use}"
        return (
            f"{ref} (too big to show in full: excerpt below; retrieve_memory with lines=, grep=, head= or "
            f"tail= reads any part)\n{part.first_use}"
        )
    # Compact form: the placeholder says how big the stored item is; the excerpt marks omitted lines.
    return f"{ref}\n{part.excerpt}" if part.excerpt else ref


def _parse_arguments(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except (ValueError, TypeError):
        return arguments


def _cap_metadata_value(value: Any, max_chars: int = 2000) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= max_chars:
        return value
    return text[:max_chars] + f"… [{len(text) - max_chars} more characters]"


async def intercept(
    message: LLMMessage,
    offloader: Offloader,
    *,
    calls: Mapping[str, FunctionCall],
    skip_tools: Collection[str],
) -> ContextEntry:
    """The context entry for ``message``: each big piece offloaded, its slot emptied and described by a part.

    ``calls`` are the recent function calls (to record a result's tool arguments); results of ``skip_tools``
    are never offloaded (they already are capped views of the store). A piece the store refuses
    (:class:`Refused`) stays in its slot, exactly, as an unbounded context would keep it.
    """
    if isinstance(message, SystemMessage):
        return ContextEntry(message=message)
    base_meta: dict[str, Any] = {"message_type": message.type}
    if isinstance(message, UserMessage):
        base_meta["source"] = message.source
        # AutoGen hands other agents' messages to a context as UserMessage(source=<agent name>).
        kind, memory_type = "user paste", "user_paste"
        if message.source and not message.source.lower().startswith("user"):
            kind = message.source
            memory_type = "command_output" if COMMAND_TOOL_RE.search(message.source) else "agent_output"
        if isinstance(message.content, str):
            part = await offloader.offload(message.content, memory_type=memory_type, metadata=base_meta, kind=kind)
            if not isinstance(part, OffloadedPart):
                return ContextEntry(message=message)
            return ContextEntry(message=message.model_copy(update={"content": ""}), parts=[part])
        new_content: list[Any] = list(message.content)
        parts: list[OffloadedPart] = []
        for i, piece in enumerate(message.content):
            if isinstance(piece, str):
                part = await offloader.offload(piece, memory_type=memory_type, metadata=base_meta, slot=i, kind=kind)
                if isinstance(part, OffloadedPart):
                    parts.append(part)
                    new_content[i] = ""
        if not parts:
            return ContextEntry(message=message)
        return ContextEntry(message=message.model_copy(update={"content": new_content}), parts=parts)
    if isinstance(message, AssistantMessage):
        base_meta["source"] = message.source
        if isinstance(message.content, str):
            part = await offloader.offload(
                message.content, memory_type="assistant_output", metadata=base_meta, kind="assistant"
            )
            if not isinstance(part, OffloadedPart):
                return ContextEntry(message=message)
            return ContextEntry(message=message.model_copy(update={"content": ""}), parts=[part])
        return ContextEntry(message=message)  # function calls: arguments must stay valid JSON
    results: list[FunctionExecutionResult] = list(message.content)
    parts = []
    for i, result in enumerate(message.content):
        if result.name in skip_tools:
            continue  # already a capped view of the store: offloading it again would hide it
        call = calls.get(result.call_id)
        meta = dict(base_meta, tool_name=result.name, call_id=result.call_id, is_error=result.is_error)
        arguments: Any = None
        if call is not None:
            arguments = _parse_arguments(call.arguments)
            meta["arguments"] = _cap_metadata_value(arguments)
        memory_type = "command_output" if COMMAND_TOOL_RE.search(result.name or "") else "tool_result"
        part = await offloader.offload(
            result.content,
            memory_type=memory_type,
            metadata=meta,
            slot=i,
            tool_name=result.name or "tool",
            arguments=arguments,
        )
        if isinstance(part, OffloadedPart):
            parts.append(part)
            results[i] = result.model_copy(update={"content": ""})
    if not parts:
        return ContextEntry(message=message)
    return ContextEntry(message=FunctionExecutionResultMessage(content=results), parts=parts)
