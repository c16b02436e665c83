"""MemoryContext: an AutoGen ``ChatCompletionContext`` that offloads big messages to the memory store.

Data path of one big tool output (ARCHITECTURE.md): ``add_message`` counts its tokens (tiktoken); above
``offload_threshold_tokens`` it stores the exact content (:meth:`MemoryStore.store`, one INSERT) and keeps
a placeholder ``[MemoryRef: <key> - <description> - <N> tokens]`` plus a short deterministic excerpt
(:mod:`agent_memory.context`). The newest ``keep_recent_full`` offloaded items are shown in full (up to
``first_use_max_tokens``) so the model can read what it just asked for; older ones only in compact form
(seed 002, first use then compact). ``get_messages`` assembles within ``token_budget`` without a database
round trip (:mod:`agent_memory.context`). The state of a (user, thread) is saved to PostgreSQL after
each change (:mod:`agent_memory.context`) and :meth:`MemoryContext.resume` rebuilds it.

With only small messages it behaves exactly like AutoGen's ``UnboundedChatCompletionContext``.

Example:
    >>> import asyncio
    >>> from autogen_core.models import FunctionExecutionResult, FunctionExecutionResultMessage
    >>> from agent_memory import MemoryContext, MemoryStore
    >>> async def main() -> str:
    ...     async with await MemoryStore.open() as store:
    ...         ctx = MemoryContext(store=store, user_id="alice", thread_id="t1")
    ...         big = "\\n".join(f"line {i}: ok" for i in range(2000))
    ...         await ctx.add_message(FunctionExecutionResultMessage(content=[
    ...             FunctionExecutionResult(content=big, name="run_code", call_id="c1")]))
    ...         [msg] = await ctx.get_messages()
    ...         return msg.content[0].content.splitlines()[0]
    >>> asyncio.run(main())  # doctest: +SKIP
    '[MemoryRef: cmd_5f0c1e2d3a4b - run_code: line 0: ok (2000 lines) - 12999 tokens] (too big to show in full: ...'
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Self

import asyncpg
from autogen_core import Component, ComponentModel, FunctionCall
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from pydantic import BaseModel, Field

from ..errors import DatabaseUnavailable, MemoryNotFound
from ..models import MemoryItem
from ..placeholders import format_memory_ref, parse_memory_refs
from ..store import MemoryStore, apply_transforms, decode_content
from ..tokens import count_tokens, truncate_to_tokens
from ..validation import check_identifier, check_user_id
from ._budget import Unit, build, message_tokens, plan
from ._compaction import (
    TextFacts,
    analyze,
    describe,
    excerpt,
    llm_description,
    llm_select_keys,
    message_identifiers,
    printable,
)
from ._state import (
    ContextEntry,
    ContextState,
    OffloadedPart,
    ReferencedItem,
    StateChanges,
    delete_context_state,
    load_context_state,
    save_context_state,
)

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

_COMMAND_TOOL_RE = re.compile(r"(exec|shell|bash|command|run_code|python|terminal|code_execution|cmd|script)", re.I)
_DEICTIC_RE = re.compile(
    r"\b(the|that|this|last|previous|latest|above)\s+(full\s+|whole\s+|complete\s+)?"
    r"(log|logs|output|outputs|result|results|error|errors|traceback|stack\s*trace|stdout|stderr|paste|file)\b",
    re.I,
)
_VAGUE_RE = re.compile(
    r"\b(the|my|our|that)\s+(usual\s+|default\s+|preferred\s+)?(db|database|server|host|repo|repository|project|"
    r"cluster|bucket|api|account|environment|env|branch|service|machine|instance|credentials|config|editor|"
    r"language|style|format|deployment|schema)\b|\b(as usual|like last time|same as (before|last time)|"
    r"the usual|my usual|as before|as always)\b",
    re.I,
)
_CONCRETE_RE = re.compile(r"://|@|\b[\w.-]+:\d{2,5}\b|[\w.-]+/[\w.-]+|[\"'`][^\"'`]{2,}[\"'`]")
_SYNONYMS = {
    "db": "database postgres postgresql mysql sqlite",
    "database": "db postgres postgresql",
    "repo": "repository git github",
    "repository": "repo git",
    "env": "environment",
    "server": "host",
    "host": "server",
}
_STOPWORDS = frozenset(
    "the a an to my our of in on for with and please that this it is me us at as same like last time before again "
    "usual default preferred can you could would will do".split()
)
_ERROR_WORD_RE = re.compile(r"\b(error|errors|fail|failed|failure|exception|traceback|warning|warnings)\b", re.I)
_ERROR_GREP = r"(?i)error|exception|traceback|fatal|fail|warning|denied|refused|exit (code|status)"
MAX_EXPANSIONS_PER_TURN = 2
# Results of the memory tools (agent_memory.tools) are already capped views of the store: never re-offloaded.
MEMORY_TOOL_NAMES = frozenset({"retrieve_memory", "search_memory", "store_memory", "list_memories"})


class MemoryContextConfig(BaseModel):
    """Declarative configuration of a :class:`MemoryContext` (AutoGen component config).

    The store is referenced, not serialised: ``database_url`` (``None``: ``AGENT_MEMORY_DATABASE_URL`` or
    the embedded server) is opened on first use.
    """

    user_id: str
    agent_id: str | None = None
    thread_id: str | None = None
    offload_threshold_tokens: int = Field(default=500, ge=1)
    token_budget: int | None = Field(default=None, ge=1)
    first_use_max_tokens: int = Field(default=2000, ge=0)
    keep_recent_full: int = Field(default=2, ge=0)
    excerpt_max_tokens: int = Field(default=100, ge=0)
    expansion_max_tokens: int = Field(default=1500, ge=0)
    user_layer_max_tokens: int = Field(default=300, ge=0)
    recall_on_ambiguity: bool = True
    autosave: bool = True
    llm_descriptions: bool = True
    llm_judge: bool = False
    llm_timeout_seconds: float = Field(default=10.0, gt=0)
    retry_interval_seconds: float = Field(default=5.0, ge=0)
    database_url: str | None = None
    model_client: ComponentModel | None = None
    initial_messages: list[LLMMessage] | None = None
    skip_offload_tools: list[str] = Field(default_factory=lambda: sorted(MEMORY_TOOL_NAMES))


def _text_of(message: LLMMessage) -> str:
    """The user-visible text of a user message (text parts joined)."""
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return message.content
        return "\n".join(p for p in message.content if isinstance(p, str))
    return ""


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


class MemoryContext(ChatCompletionContext, Component[MemoryContextConfig]):
    """A chat completion context with a two-layer memory: placeholders in context, exact content in Postgres.

    Args:
        store: the :class:`MemoryStore` (``None``: opened on first use from ``database_url`` / settings).
        user_id: whose memory this is; every store call is scoped to this user.
        agent_id, thread_id: recorded with every stored item; ``thread_id`` also keys the saved state.
        offload_threshold_tokens: messages (or pieces of them) above this many tokens are offloaded.
        token_budget: when set, ``get_messages`` returns at most this many tokens (see ``context_budget``).
        model_client: optional model for one-line summaries of offloaded items (and, with ``llm_judge``,
            for deciding which items to expand); every LLM failure falls back to the deterministic rules.
        first_use_max_tokens: the newest offloaded items are shown in full up to this size ("first use").
        keep_recent_full: how many of the newest offloaded items keep their first-use view.
        excerpt_max_tokens: size of the excerpt kept with each compacted placeholder.
        expansion_max_tokens: cap of an expansion (also at most a quarter of ``token_budget``).
        user_layer_max_tokens: budget of the user-layer system message (0 disables it).
        recall_on_ambiguity: search the user's preferences/facts for short vague requests.
        autosave: save the state to PostgreSQL after each change (needs ``thread_id``).
        llm_descriptions, llm_judge, llm_timeout_seconds: how ``model_client`` is used (see above).
        retry_interval_seconds: while the database is down, ``get_messages`` retries at most this often.
        database_url: where to open the store when ``store`` is ``None`` (else settings / embedded server).
        initial_messages: messages to start with (kept as they are, like AutoGen's contexts).
        skip_offload_tools: tools whose results are never offloaded (the memory tools' own views).

    Example:
        >>> ctx = MemoryContext(store=None, user_id="alice", thread_id="demo", token_budget=8000)
        >>> ctx.dump_component().provider
        'agent_memory.MemoryContext'
    """

    component_config_schema = MemoryContextConfig
    component_provider_override = "agent_memory.MemoryContext"

    def __init__(
        self,
        store: MemoryStore | None,
        user_id: str,
        agent_id: str | None = None,
        thread_id: str | None = None,
        offload_threshold_tokens: int = 500,
        token_budget: int | None = None,
        model_client: ChatCompletionClient | None = None,
        *,
        first_use_max_tokens: int = 2000,
        keep_recent_full: int = 2,
        excerpt_max_tokens: int = 100,
        expansion_max_tokens: int = 1500,
        user_layer_max_tokens: int = 300,
        recall_on_ambiguity: bool = True,
        autosave: bool = True,
        llm_descriptions: bool = True,
        llm_judge: bool = False,
        llm_timeout_seconds: float = 10.0,
        retry_interval_seconds: float = 5.0,
        database_url: str | None = None,
        initial_messages: list[LLMMessage] | None = None,
        skip_offload_tools: Iterable[str] = MEMORY_TOOL_NAMES,
    ) -> None:
        super().__init__(initial_messages)
        self._config = MemoryContextConfig(
            user_id=check_user_id(user_id),
            agent_id=check_identifier(agent_id, "agent_id", optional=True),
            thread_id=check_identifier(thread_id, "thread_id", optional=True),
            offload_threshold_tokens=offload_threshold_tokens,
            token_budget=token_budget,
            first_use_max_tokens=first_use_max_tokens,
            keep_recent_full=keep_recent_full,
            excerpt_max_tokens=excerpt_max_tokens,
            expansion_max_tokens=expansion_max_tokens,
            user_layer_max_tokens=user_layer_max_tokens,
            recall_on_ambiguity=recall_on_ambiguity,
            autosave=autosave,
            llm_descriptions=llm_descriptions,
            llm_judge=llm_judge,
            llm_timeout_seconds=llm_timeout_seconds,
            retry_interval_seconds=retry_interval_seconds,
            database_url=database_url,
            initial_messages=initial_messages,
            skip_offload_tools=sorted(skip_offload_tools),
        )
        self._store = store
        self._owns_store = False
        self._skip_offload_tools = frozenset(skip_offload_tools)
        self._model_client = model_client
        self._lock = asyncio.Lock()
        self._state = ContextState(entries=[ContextEntry(message=m) for m in initial_messages or []])
        self._state.assign_ids()
        self._changes = StateChanges()  # what the next save must write
        self._dirty = False  # state changed but not yet saved (database was unreachable)
        self._view: list[LLMMessage] | None = None  # get_messages() result until the next change
        self._retry_at = 0.0  # monotonic time before which get_messages() does not retry the database
        self._layer_fresh = False  # the user layer was (re)loaded by this object
        # entry id -> (first-use rendering, its tokens, compact rendering, its tokens); rebuilt on demand
        self._renders: dict[int, tuple[LLMMessage, int, LLMMessage, int]] = {}

    # ------------------------------------------------------------------ properties

    @property
    def user_id(self) -> str:
        return self._config.user_id

    @property
    def agent_id(self) -> str | None:
        return self._config.agent_id

    @property
    def thread_id(self) -> str | None:
        return self._config.thread_id

    @property
    def token_budget(self) -> int | None:
        return self._config.token_budget

    @property
    def offload_threshold_tokens(self) -> int:
        return self._config.offload_threshold_tokens

    @property
    def entries(self) -> list[ContextEntry]:
        """The context's entries (read-only use: inspection, tests, UIs)."""
        return self._state.entries

    @property
    def pending_count(self) -> int:
        """How many offloaded pieces are still waiting for the database."""
        return sum(1 for e in self._state.entries for p in e.parts if p.key is None)

    @property
    def memory_keys(self) -> list[str]:
        """Keys of every item this context offloaded, oldest first."""
        return [p.key for e in self._state.entries for p in e.parts if p.key]

    async def get_store(self) -> MemoryStore:
        """The store, opened from ``database_url`` / settings on first use when none was given."""
        if self._store is None:
            self._store = await MemoryStore.open(self._config.database_url)
            self._owns_store = True
        return self._store

    async def close(self) -> None:
        """Close the store if this context opened it."""
        if self._owns_store and self._store is not None:
            await self._store.close()
            self._store = None
            self._owns_store = False

    # ------------------------------------------------------------------ ChatCompletionContext API

    async def add_message(self, message: LLMMessage) -> None:
        """Add a message; big pieces are stored and replaced by placeholder + excerpt (see module docstring)."""
        async with self._lock:
            if self.pending_count:
                await self._flush_locked()
            if not self._layer_fresh:
                # Once per session (this object): a resumed thread shows its saved layer until its first new
                # message, then the user's current preferences and facts.
                await self._load_user_layer()
            if isinstance(message, UserMessage):
                # Expansions are for the turn they were made for (recall notes are short and stay).
                self._remove_entries(kind="expansion")
            entry = await self._intercept(message)
            await self._register_refs(entry)
            self._append(entry)
            if entry.parts:
                self._advance_first_use_window()
            if isinstance(message, UserMessage):
                await self._recall_for(_text_of(message), entry)
            self._view = None
            if self._config.token_budget is not None:
                await self._archive_dropped_spans()
            await self._autosave()

    async def get_messages(self) -> list[LLMMessage]:
        """The conversation as the model should see it, within ``token_budget`` when set.

        No database round trip, except to offload pieces kept inline while the database was down.
        """
        if (self.pending_count or self._dirty) and time.monotonic() >= self._retry_at:
            async with self._lock:
                await self._flush_locked()
        if self._view is None:
            units = self._units()
            budget = self._config.token_budget
            self._view = [m for u in units for m in u.messages] if budget is None else build(units, plan(units, budget))
        return list(self._view)

    async def clear(self) -> None:
        """Forget the conversation (the stored memories stay in the store)."""
        async with self._lock:
            self._state = ContextState()
            self._renders.clear()
            self._changes.everything()
            self._layer_fresh = False  # the next message starts a new conversation: load the layer again
            self._messages = []
            self._view = None
            await self._autosave()

    async def save_state(self) -> Mapping[str, Any]:
        """JSON-serialisable state (``json.dumps`` works on it); :meth:`load_state` restores it exactly."""
        return self._state.model_dump(mode="json")

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore a state from :meth:`save_state` (or AutoGen's ``{"messages": [...]}`` context state)."""
        async with self._lock:
            self._state = self._parse_state(state)
            self._renders.clear()
            self._changes.everything()
            self._view = None
            await self._autosave()

    @staticmethod
    def _parse_state(state: Mapping[str, Any]) -> ContextState:
        if "entries" in state:
            parsed = ContextState.model_validate(state)
        else:
            from autogen_core.model_context._chat_completion_context import ChatCompletionContextState

            messages = ChatCompletionContextState.model_validate(state).messages
            parsed = ContextState(entries=[ContextEntry(message=m) for m in messages])
        parsed.assign_ids()
        return parsed

    # ------------------------------------------------------------------ recall API

    async def store(self, content: str, description: str = "", memory_type: str = "note", **metadata: Any) -> str:
        """Store ``content`` for this context's user (and agent/thread); return its key."""
        store = await self.get_store()
        return await store.store(
            content,
            user_id=self.user_id,
            description=description,
            memory_type=memory_type,
            agent_id=self.agent_id,
            thread_id=self.thread_id,
            metadata=metadata or None,
        )

    async def retrieve(self, key: str, **transforms: Any) -> str:
        """Exact content of ``key`` for this user, or a view (``head``, ``tail``, ``lines``, ``grep``...).

        Raises :class:`MemoryNotFound` for unknown keys and for other users' keys alike.
        """
        store = await self.get_store()
        return await store.retrieve(key, user_id=self.user_id, **transforms)

    async def search(self, query: str, limit: int = 5, memory_type: str | None = None) -> list[MemoryItem]:
        """This user's memories best matching ``query``."""
        store = await self.get_store()
        return await store.search(query, user_id=self.user_id, limit=limit, memory_type=memory_type)

    # ------------------------------------------------------------------ persistence

    @classmethod
    async def resume(
        cls, store: MemoryStore | None, user_id: str, thread_id: str, agent_id: str | None = None, **kwargs: Any
    ) -> Self:
        """A context for (user, thread, agent) rebuilt from its saved state (empty when none was saved)."""
        ctx = cls(store, user_id, agent_id=agent_id, thread_id=thread_id, **kwargs)
        await ctx.load()
        return ctx

    async def load(self) -> bool:
        """Replace the state with the one saved for (user, thread, agent); ``False`` when none exists."""
        if self.thread_id is None:
            raise ValueError("load() needs a thread_id")
        store = await self.get_store()
        changes = StateChanges()
        loaded = await load_context_state(store.db.pool, self.user_id, self.thread_id, self.agent_id, changes)
        if loaded is None:
            return False
        async with self._lock:
            self._state = loaded
            self._renders.clear()
            self._changes = changes  # the database holds exactly this state, at this revision
            self._view = None
            self._dirty = False
        return True

    async def save(self) -> None:
        """Save the state for (user, thread, agent) now (``autosave`` does this after each change)."""
        if self.thread_id is None:
            raise ValueError("save() needs a thread_id")
        store = await self.get_store()
        await save_context_state(store.db.pool, self.user_id, self.thread_id, self.agent_id, self._state, self._changes)
        self._changes.clear()
        self._dirty = False

    async def delete_saved_state(self) -> None:
        """Remove the saved state of (user, thread, agent) from the database."""
        if self.thread_id is None:
            return
        store = await self.get_store()
        await delete_context_state(store.db.pool, self.user_id, self.thread_id, self.agent_id)

    async def flush(self) -> int:
        """Offload pieces kept inline while the database was down, and save unsaved state.

        Returns how many pieces are still pending (0 when everything is stored).
        """
        async with self._lock:
            await self._flush_locked()
        return self.pending_count

    async def _autosave(self) -> None:
        if not (self._config.autosave and self.thread_id):
            return
        try:
            await self.save()
        except DB_UNAVAILABLE_ERRORS as exc:
            log.warning("could not save the context state (%s); will retry", exc)
            self._dirty = True
            self._retry_at = time.monotonic() + self._config.retry_interval_seconds

    async def _flush_locked(self) -> None:
        changed = False
        for entry in self._state.entries:
            for part in entry.parts:
                if part.key is not None or part.pending_content is None:
                    continue
                try:
                    part.key = await self._store_part(part.pending_content, part)
                except DB_UNAVAILABLE_ERRORS as exc:
                    log.info("database still unreachable (%s); %d piece(s) pending", exc, self.pending_count)
                    # get_messages() retries only after a pause, so a dead server does not slow every call.
                    self._retry_at = time.monotonic() + self._config.retry_interval_seconds
                    return
                part.pending_content = None
                self._touched(entry)
                self._view = None
                changed = True
        if changed or self._dirty:
            self._dirty = False
            await self._autosave()  # marks the state dirty again if the database is still away

    # ------------------------------------------------------------------ interception

    async def _intercept(self, message: LLMMessage) -> ContextEntry:
        """The entry for ``message``: each big piece offloaded, its slot emptied and described by a part."""
        if isinstance(message, SystemMessage):
            return ContextEntry(message=message)
        base_meta: dict[str, Any] = {"message_type": message.type}
        if isinstance(message, UserMessage):
            base_meta["source"] = message.source
            # AutoGen hands other agents' messages to a context as UserMessage(source=<agent name>).
            kind, memory_type = "user paste", "user_paste"
            if message.source and not message.source.lower().startswith("user"):
                kind = message.source
                memory_type = "command_output" if _COMMAND_TOOL_RE.search(message.source) else "agent_output"
            if isinstance(message.content, str):
                part = await self._offload(message.content, 0, memory_type, base_meta, kind=kind)
                if part is None:
                    return ContextEntry(message=message)
                return ContextEntry(message=message.model_copy(update={"content": ""}), parts=[part])
            new_content: list[Any] = list(message.content)
            parts: list[OffloadedPart] = []
            for i, piece in enumerate(message.content):
                if isinstance(piece, str):
                    part = await self._offload(piece, i, memory_type, base_meta, kind=kind)
                    if part is not None:
                        parts.append(part)
                        new_content[i] = ""
            if not parts:
                return ContextEntry(message=message)
            return ContextEntry(message=message.model_copy(update={"content": new_content}), parts=parts)
        if isinstance(message, AssistantMessage):
            base_meta["source"] = message.source
            if isinstance(message.content, str):
                part = await self._offload(message.content, 0, "assistant_output", base_meta, kind="assistant")
                if part is None:
                    return ContextEntry(message=message)
                return ContextEntry(message=message.model_copy(update={"content": ""}), parts=[part])
            return ContextEntry(message=message)  # function calls: arguments must stay valid JSON
        results: list[FunctionExecutionResult] = list(message.content)
        calls = self._recent_calls()
        parts = []
        for i, result in enumerate(message.content):
            if result.name in self._skip_offload_tools:
                continue  # already a capped view of the store: offloading it again would hide it
            call = calls.get(result.call_id)
            meta = dict(base_meta, tool_name=result.name, call_id=result.call_id, is_error=result.is_error)
            arguments: Any = None
            if call is not None:
                arguments = _parse_arguments(call.arguments)
                meta["arguments"] = _cap_metadata_value(arguments)
            memory_type = "command_output" if _COMMAND_TOOL_RE.search(result.name or "") else "tool_result"
            part = await self._offload(
                result.content, i, memory_type, meta, tool_name=result.name or "tool", arguments=arguments
            )
            if part is not None:
                parts.append(part)
                results[i] = result.model_copy(update={"content": ""})
        if not parts:
            return ContextEntry(message=message)
        return ContextEntry(message=FunctionExecutionResultMessage(content=results), parts=parts)

    def _recent_calls(self) -> dict[str, FunctionCall]:
        """Function calls of the latest assistant call messages (to record a result's tool arguments)."""
        calls: dict[str, FunctionCall] = {}
        for entry in reversed(self._state.entries[-20:]):
            msg = entry.message
            if isinstance(msg, AssistantMessage) and isinstance(msg.content, list):
                for call in msg.content:
                    calls.setdefault(call.id, call)
        return calls

    async def _offload(
        self,
        text: str,
        slot: int,
        memory_type: str,
        metadata: dict[str, Any],
        *,
        kind: str | None = None,
        tool_name: str | None = None,
        arguments: Any = None,
    ) -> OffloadedPart | None:
        threshold = self._config.offload_threshold_tokens
        # A token is at least one UTF-8 byte and a character at most four: short texts need no count.
        if len(text) * 4 <= threshold:
            return None
        facts: TextFacts | None = None
        if len(text) > 200_000:
            # Big output: count (tiktoken releases the GIL) and analyse in parallel, off the event loop.
            tokens, facts = await asyncio.gather(
                asyncio.to_thread(count_tokens, text), asyncio.to_thread(analyze, text)
            )
        else:
            tokens = count_tokens(text)
        if tokens <= threshold:
            return None
        facts = facts or analyze(text)  # one pass shared by the description and both excerpts
        args_for_description = arguments if isinstance(arguments, (dict, str)) else None
        # No token count in the description: the placeholder carries it.
        description = describe(text, tool_name=tool_name, arguments=args_for_description, kind=kind, facts=facts)
        if self._model_client is not None and self._config.llm_descriptions:
            description = await llm_description(
                self._model_client,
                text,
                fallback=description,
                hint=f"Source: {tool_name or kind or memory_type}",
                timeout_seconds=self._config.llm_timeout_seconds,
            )
        description = printable(description)
        meta = dict(metadata)
        meta.update(
            {
                "agent_id": self.agent_id,
                "thread_id": self.thread_id,
                "stored_at": datetime.now(UTC).isoformat(),
                "offloaded_by": "MemoryContext",
            }
        )
        first_use_cap = self._config.first_use_max_tokens
        fits = tokens <= first_use_cap
        part = OffloadedPart(
            slot=slot,
            tokens=tokens,
            description=description,
            excerpt=excerpt(text, max_tokens=self._config.excerpt_max_tokens, facts=facts),
            memory_type=memory_type,
            metadata=meta,
            first_use=(text if fits else excerpt(text, max_tokens=first_use_cap, facts=facts))
            if first_use_cap > 0
            else None,
            first_use_is_full=fits and first_use_cap > 0,
            # Cheap local identifiers; the content itself is matched in SQL when a user message arrives.
            identifiers=sorted(
                message_identifiers(f"{description}\n{json.dumps(arguments, default=str) if arguments else ''}")
            ),
        )
        try:
            part.key = await self._store_part(text, part)
        except DB_UNAVAILABLE_ERRORS as exc:
            log.warning("database unreachable (%s): keeping %d tokens inline until it is back", exc, tokens)
            part.pending_content = text
            self._retry_at = time.monotonic() + self._config.retry_interval_seconds
        except ValueError as exc:
            # The store refuses what it cannot keep exactly (lone surrogates, over the size limit). The context
            # must not alter or lose it either: it stays inline, as an unbounded context would keep it.
            log.warning("content not offloaded, kept inline: %s", exc)
            return None
        return part

    async def _store_part(self, text: str, part: OffloadedPart) -> str:
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
        )

    def _advance_first_use_window(self) -> None:
        """Compact for good every offloaded part older than the newest ``keep_recent_full``."""
        live = [(e, p) for e in self._state.entries if e.kind == "message" for p in e.parts if not p.compacted]
        keep = self._config.keep_recent_full
        for entry, part in live[: max(0, len(live) - keep)]:
            part.compacted = True
            part.first_use = None
            self._touched(entry)

    def _append(self, entry: ContextEntry) -> None:
        entry.id = self._state.next_entry_id
        self._state.next_entry_id += 1
        self._state.entries.append(entry)
        self._changes.touch(entry)

    def _touched(self, entry: ContextEntry) -> None:
        """An entry changed in place: re-render it and save it again."""
        self._renders.pop(entry.id, None)
        self._changes.touch(entry)

    def _remove_entries(self, kind: str) -> None:
        kept: list[ContextEntry] = []
        for e in self._state.entries:
            if e.kind == kind:
                self._changes.remove(e)
            else:
                kept.append(e)
        if len(kept) != len(self._state.entries):
            self._state.entries = kept

    # ------------------------------------------------------------------ rendering

    def _part_text(self, part: OffloadedPart, compact: bool) -> str:
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

    def _render_message(self, entry: ContextEntry, compact: bool) -> LLMMessage:
        msg = entry.message
        if not entry.parts:
            return msg
        texts = {p.slot: self._part_text(p, compact) for p in entry.parts}
        if isinstance(msg, FunctionExecutionResultMessage):
            return FunctionExecutionResultMessage(
                content=[
                    r.model_copy(update={"content": texts[i]}) if i in texts else r for i, r in enumerate(msg.content)
                ]
            )
        if isinstance(msg, UserMessage) and isinstance(msg.content, list):
            pieces = [texts.get(i, piece) if isinstance(piece, str) else piece for i, piece in enumerate(msg.content)]
            return msg.model_copy(update={"content": pieces})
        return msg.model_copy(update={"content": texts[0]})

    def _render(self, entry: ContextEntry) -> tuple[LLMMessage, int, LLMMessage, int]:
        """(first-use rendering, its tokens, compact rendering, its tokens), cached per entry."""
        cached = self._renders.get(entry.id)
        if cached is not None:
            return cached
        full = self._render_message(entry, compact=False)
        compact = self._render_message(entry, compact=True) if entry.parts else full
        full_tokens = message_tokens(full)
        compact_tokens = message_tokens(compact) if compact is not full else full_tokens
        result = (full, full_tokens, compact, compact_tokens)
        self._renders[entry.id] = result
        return result

    def _units(self) -> list[Unit]:
        """Entries as budget units: leading system messages and the user layer pinned, calls with results."""
        entries = self._state.entries
        units: list[Unit] = []
        i = 0
        while i < len(entries) and isinstance(entries[i].message, SystemMessage) and entries[i].kind == "message":
            full, tokens, _, _ = self._render(entries[i])
            units.append(Unit(messages=[full], tokens=tokens, pinned=True))
            i += 1
        if self._state.user_layer is not None:
            layer = self._state.user_layer
            units.append(Unit(messages=[layer], tokens=message_tokens(layer), pinned=True))
        for group in self._entry_groups():
            rendered = [self._render(e) for e in group]
            units.append(
                Unit(
                    messages=[r[0] for r in rendered],
                    tokens=sum(r[1] for r in rendered),
                    compact=[r[2] for r in rendered],
                    compact_tokens=sum(r[3] for r in rendered),
                    keys=[p.key for e in group for p in e.parts if p.key] + [r.key for e in group for r in e.refs],
                    archive_keys=[e.archive_key for e in group if e.archive_key],
                )
            )
        return units

    # ------------------------------------------------------------------ dropped spans

    async def _archive_dropped_spans(self) -> None:
        """Store the text of messages the budget now drops, so nothing leaves the context unrecoverable.

        Offloaded pieces are already in the store; this keeps the rest (small user requests, short tool
        results, answers) as one ``conversation`` memory per newly dropped span, named by the omitted note.
        """
        budget = self._config.token_budget
        if budget is None:
            return
        units = self._units()
        dropped = plan(units, budget).dropped
        if not dropped:
            return
        # Map units back to entries: pinned units come first and are never dropped.
        entry_groups = self._entry_groups()
        offset = len(units) - len(entry_groups)
        span = [e for d in dropped for e in entry_groups[d - offset] if e.kind == "message" and e.archive_key is None]
        if not span:
            return
        transcript = "\n".join(_transcript_line(self._render(e)[2]) for e in span)
        # A derived transcript, not user content: lone surrogates (which the store refuses) become escapes.
        transcript = transcript.encode("utf-8", "backslashreplace").decode("utf-8")
        first_user = next((_text_of(e.message) for e in span if isinstance(e.message, UserMessage)), "")
        description = f"conversation span of {len(span)} message(s) omitted from the context"
        if first_user.strip():
            description += f", starting: {' '.join(printable(first_user).split())[:60]}"
        try:
            store = await self.get_store()
            key = await store.store(
                transcript,
                user_id=self.user_id,
                description=description,
                memory_type="conversation",
                agent_id=self.agent_id,
                thread_id=self.thread_id,
                metadata={"message_count": len(span), "offloaded_by": "MemoryContext"},
            )
        except DB_UNAVAILABLE_ERRORS as exc:
            log.info("dropped span not archived yet (%s); will retry", exc)
            return
        except ValueError as exc:  # refused by the store's validation: the note still names the item keys
            log.warning("dropped span not archived: %s", exc)
            return
        for e in span:
            e.archive_key = key
            self._changes.touch(e)
        self._view = None

    def _entry_groups(self) -> list[list[ContextEntry]]:
        """Entries grouped exactly as :meth:`_units` groups them (excluding pinned units)."""
        entries = self._state.entries
        i = 0
        while i < len(entries) and isinstance(entries[i].message, SystemMessage) and entries[i].kind == "message":
            i += 1
        groups: list[list[ContextEntry]] = []
        while i < len(entries):
            group = [entries[i]]
            msg = entries[i].message
            i += 1
            if isinstance(msg, AssistantMessage) and isinstance(msg.content, list):
                while i < len(entries) and isinstance(entries[i].message, FunctionExecutionResultMessage):
                    group.append(entries[i])
                    i += 1
            groups.append(group)
        return groups

    # ------------------------------------------------------------------ user layer and recall

    async def _load_user_layer(self) -> None:
        """Load the user's standing memories (preferences, facts) once, as one system message."""
        budget = self._config.user_layer_max_tokens
        if budget <= 0:
            self._state.user_layer_loaded = True
            self._layer_fresh = True
            return
        try:
            store = await self.get_store()
            rows = await store.db.pool.fetch(
                """SELECT m.memory_key, m.memory_type, m.description, left(m.content, 2000) AS content,
                          m.content_encoding, m.token_count
                   FROM agent_memories m JOIN "User" u ON u.id = m.user_id
                   WHERE u.identifier = $1 AND m.is_active
                     AND m.memory_type IN ('user_preference', 'user_fact')
                   ORDER BY m.created_at DESC, m.memory_key LIMIT 50""",
                self.user_id,
            )
        except DB_UNAVAILABLE_ERRORS as exc:
            log.info("user layer not loaded (%s); will retry", exc)
            return
        header = "Standing memories of this user (preferences and facts, newest first):"
        lines: list[str] = []
        keys: list[str] = []
        used = count_tokens(header)
        for row in rows:
            content = decode_content(row["content"], row["content_encoding"])
            kind = "preference" if row["memory_type"] == "user_preference" else "fact"
            if row["token_count"] <= 80 and len(content) < 2000:
                text = " ".join(printable(content).split())
                line = f"- ({kind}) {text} [{row['memory_key']}]"
            else:
                line = f"- ({kind}) {format_memory_ref(row['memory_key'], row['description'], row['token_count'])}"
            cost = count_tokens(line) + 1
            if used + cost > budget:
                break
            lines.append(line)
            keys.append(row["memory_key"])
            used += cost
        self._state.user_layer_loaded = True
        self._layer_fresh = True
        self._state.user_layer = SystemMessage(content="\n".join([header, *lines])) if lines else None
        self._state.user_layer_keys = keys

    def _candidates(self, exclude: ContextEntry) -> list[OffloadedPart]:
        """Items a user message may refer to: what this context offloaded, and verified references."""
        out: list[OffloadedPart] = []
        seen: set[str] = set()
        for e in self._state.entries:
            if e.kind != "message" or e is exclude:
                continue
            for p in e.parts:
                if p.key is not None and p.key not in seen:
                    seen.add(p.key)
                    out.append(p)
            for r in e.refs:
                if r.key not in seen:
                    seen.add(r.key)
                    out.append(
                        OffloadedPart(
                            slot=-1,
                            key=r.key,
                            tokens=r.tokens,
                            description=r.description,
                            excerpt="",
                            memory_type=r.memory_type,
                            identifiers=sorted(message_identifiers(r.description)),
                            compacted=True,
                        )
                    )
        return out

    async def _register_refs(self, entry: ContextEntry) -> None:
        """Record placeholders in the message's own text that name one of this user's memories.

        Another user's key, or a made-up one, is not found by the user-scoped lookup and stays plain text.
        """
        msg = entry.message
        texts: list[str] = []
        if isinstance(msg, FunctionExecutionResultMessage):
            texts = [r.content for r in msg.content]
        elif isinstance(msg.content, str):
            texts = [msg.content]
        else:
            texts = [p for p in msg.content if isinstance(p, str)]
        known = {p.key for e in self._state.entries for p in e.parts if p.key} | {p.key for p in entry.parts}
        keys: list[str] = []
        for text in texts:
            if "[MemoryRef: " not in text:
                continue
            keys.extend(ref.key for ref in parse_memory_refs(text) if ref.key not in known)
        for key in list(dict.fromkeys(keys))[:10]:
            try:
                item = await (await self.get_store()).get(key, user_id=self.user_id)
            except MemoryNotFound:
                continue
            except DB_UNAVAILABLE_ERRORS as exc:
                log.info("reference %s not verified (%s)", key, exc)
                continue
            entry.refs.append(
                ReferencedItem(
                    key=item.memory_key,
                    description=item.description,
                    tokens=item.token_count,
                    memory_type=item.memory_type,
                )
            )

    async def _content_matches(self, idents: set[str], candidates: list[OffloadedPart]) -> dict[str, set[str]]:
        """Which of the message's identifiers occur in each candidate's stored content (one query, user-scoped)."""
        if not idents or not candidates:
            return {}
        wanted = sorted(idents, key=len, reverse=True)[:20]
        keys = [p.key for p in candidates[-30:] if p.key]  # the newest items; each scanned up to 1 MB
        try:
            store = await self.get_store()
            rows = await store.db.pool.fetch(
                """SELECT m.memory_key,
                          ARRAY(SELECT i FROM unnest($3::text[]) AS i
                                WHERE strpos(lower(left(m.content, 1000000)), i) > 0) AS hits
                   FROM agent_memories m JOIN "User" u ON u.id = m.user_id
                   WHERE u.identifier = $1 AND m.memory_key = ANY($2::text[]) AND m.is_active""",
                self.user_id,
                keys,
                wanted,
            )
        except DB_UNAVAILABLE_ERRORS as exc:
            log.info("content match for expansion skipped (%s)", exc)
            return {}
        return {r["memory_key"]: set(r["hits"]) for r in rows if r["hits"]}

    async def _select_for_expansion(
        self, text: str, candidates: list[OffloadedPart]
    ) -> list[tuple[OffloadedPart, set[str]]]:
        """Deterministic relevance: shared identifiers (file names, error codes, keys) or "the log"."""
        idents = message_identifiers(text)
        lowered = text.lower()
        in_content = await self._content_matches(idents, candidates)
        scored: list[tuple[int, int, OffloadedPart, set[str]]] = []
        for order, part in enumerate(candidates):
            assert part.key is not None
            matched = (idents & set(part.identifiers)) | in_content.get(part.key, set())
            score = 3 * len(matched)
            if part.key.lower() in lowered:
                score += 10  # the user names our own key (a foreign key is never a candidate)
            if score:
                scored.append((score, order, part, matched))
        if not scored and _DEICTIC_RE.search(text) and candidates:
            latest = candidates[-1]
            return [(latest, set())]
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        return [(p, m) for _, _, p, m in scored[:MAX_EXPANSIONS_PER_TURN]]

    async def _recall_for(self, text: str, entry: ContextEntry) -> None:
        """Expand offloaded items the new user message refers to; recall user memories for vague requests."""
        if not text.strip():
            return
        candidates = self._candidates(entry)
        chosen: list[tuple[OffloadedPart, set[str]]] = []
        if candidates:
            keys: list[str] | None = None
            if self._model_client is not None and self._config.llm_judge:
                keys = await llm_select_keys(
                    self._model_client,
                    text,
                    [(p.key or "", p.description) for p in candidates[-30:]],
                    timeout_seconds=self._config.llm_timeout_seconds,
                )
            if keys is not None:
                by_key = {p.key: p for p in candidates}
                picked = [by_key[k] for k in keys[:MAX_EXPANSIONS_PER_TURN]]
                hits = await self._content_matches(message_identifiers(text), picked)
                chosen = [(p, hits.get(p.key or "", set())) for p in picked]
            else:
                chosen = await self._select_for_expansion(text, candidates)
        for part, matched in chosen:
            if not part.compacted and part.first_use_is_full:
                continue  # already visible in full
            await self._expand(part, matched, text)
        if not chosen and self._config.recall_on_ambiguity and self._is_ambiguous(text):
            await self._recall_user_memories(text)

    def _expansion_budget(self) -> int:
        cap = self._config.expansion_max_tokens
        if self._config.token_budget is not None:
            cap = min(cap, self._config.token_budget // 4)
        return cap

    async def _expand(self, part: OffloadedPart, matched: set[str], request: str) -> None:
        assert part.key is not None
        budget = self._expansion_budget()
        if budget <= 50:
            return
        try:
            content = await self.retrieve(part.key)
        except MemoryNotFound:
            return
        except DB_UNAVAILABLE_ERRORS as exc:
            log.info("expansion of %s skipped (%s)", part.key, exc)
            return
        if matched:
            pattern = "|".join(re.escape(m) for m in sorted(matched, key=len, reverse=True))
            view = apply_transforms(content, grep=pattern, ignore_case=True, context=3, max_matches=40)
            how = f"lines matching {', '.join(sorted(matched))} (N: = match, N- = context)"
        elif _ERROR_WORD_RE.search(request):
            view = apply_transforms(content, grep=_ERROR_GREP, context=2, max_matches=40)
            how = "error and warning lines (N: = match, N- = context)"
        else:
            view = ""
            how = ""
        if not view.strip():
            view = excerpt(content, max_tokens=budget - 60)
            how = "excerpt"
        view = truncate_to_tokens(view, budget - 60)
        ref = format_memory_ref(part.key, part.description, part.tokens)
        note = SystemMessage(content=f"[Memory expansion for this request: {ref}, {how}]\n{view}")
        self._append(ContextEntry(message=note, kind="expansion"))

    @staticmethod
    def _is_ambiguous(text: str) -> bool:
        """A short request naming something generic ("the db") without concrete parameters (seed 001 4.2)."""
        words = text.split()
        if not words or len(words) > 30:
            return False
        return bool(_VAGUE_RE.search(text)) and not _CONCRETE_RE.search(text)

    async def _recall_user_memories(self, text: str) -> None:
        words = [w for w in re.findall(r"[A-Za-z0-9_]+", text.lower()) if w not in _STOPWORDS]
        # Short queries (search scores by the share of query words found): the request itself, then the same
        # request with each vague noun replaced by a synonym ("db" -> "database", "postgres"...).
        queries = [" ".join(words)] if words else []
        for i, word in enumerate(words):
            for synonym in _SYNONYMS.get(word, "").split():
                queries.append(" ".join([*words[:i], synonym, *words[i + 1 :]]))
        best: dict[str, MemoryItem] = {}
        try:
            for query in queries[:6]:
                for item in await self.search(query, limit=10):
                    if item.memory_type not in ("user_preference", "user_fact"):
                        continue
                    if item.memory_key not in best or (item.score or 0) > (best[item.memory_key].score or 0):
                        best[item.memory_key] = item
        except DB_UNAVAILABLE_ERRORS as exc:
            log.info("recall for an ambiguous request skipped (%s)", exc)
            return
        hits = sorted(best.values(), key=lambda h: h.score or 0.0, reverse=True)
        shown = set(self._state.user_layer_keys)
        lines: list[str] = []
        for item in hits:
            if item.memory_key in shown or len(lines) >= 3:
                continue
            shown.add(item.memory_key)
            if item.token_count <= 100:
                try:
                    content = " ".join((await self.retrieve(item.memory_key)).split())
                except (MemoryNotFound, *DB_UNAVAILABLE_ERRORS):  # type: ignore[misc]
                    continue
                ref = format_memory_ref(item.memory_key, item.description or item.memory_type, item.token_count)
                lines.append(f"- {content} {ref}")
            else:
                lines.append(f"- {format_memory_ref(item.memory_key, item.description, item.token_count)}")
        if lines:
            note = "[Possibly relevant memories of this user for the request above:]\n" + "\n".join(lines)
            self._append(ContextEntry(message=SystemMessage(content=note), kind="recall"))

    # ------------------------------------------------------------------ component config

    def _to_config(self) -> MemoryContextConfig:
        config = self._config.model_copy()
        if config.database_url is None and self._store is not None:
            url = self._store.db.url
            # Record the server only when the URL carries no password (configs get shared and logged).
            from urllib.parse import urlsplit

            if urlsplit(url).password is None:
                config.database_url = url
        if self._model_client is not None:
            try:
                config.model_client = self._model_client.dump_component()
            except Exception as exc:  # a client that is not a component cannot be declared in JSON
                log.warning("model_client not serialisable (%s); omitted from the config", exc)
        return config

    @classmethod
    def _from_config(cls, config: MemoryContextConfig) -> Self:
        model_client = (
            ChatCompletionClient.load_component(config.model_client) if config.model_client is not None else None
        )
        return cls(
            None,
            config.user_id,
            agent_id=config.agent_id,
            thread_id=config.thread_id,
            offload_threshold_tokens=config.offload_threshold_tokens,
            token_budget=config.token_budget,
            model_client=model_client,
            first_use_max_tokens=config.first_use_max_tokens,
            keep_recent_full=config.keep_recent_full,
            excerpt_max_tokens=config.excerpt_max_tokens,
            expansion_max_tokens=config.expansion_max_tokens,
            user_layer_max_tokens=config.user_layer_max_tokens,
            recall_on_ambiguity=config.recall_on_ambiguity,
            autosave=config.autosave,
            llm_descriptions=config.llm_descriptions,
            llm_judge=config.llm_judge,
            llm_timeout_seconds=config.llm_timeout_seconds,
            retry_interval_seconds=config.retry_interval_seconds,
            database_url=config.database_url,
            initial_messages=config.initial_messages,
            skip_offload_tools=config.skip_offload_tools,
        )


def _transcript_line(message: LLMMessage) -> str:
    """One message as plain text for a stored conversation span."""
    if isinstance(message, SystemMessage):
        return f"[system]: {message.content}"
    if isinstance(message, UserMessage):
        return f"[user {message.source}]: {_text_of(message)}"
    if isinstance(message, AssistantMessage):
        if isinstance(message.content, str):
            return f"[assistant {message.source}]: {message.content}"
        calls = "; ".join(f"{c.name}({c.arguments}) id={c.id}" for c in message.content)
        return f"[assistant {message.source} calls]: {calls}"
    return "\n".join(
        f"[tool result {r.name} id={r.call_id}{' error' if r.is_error else ''}]: {r.content}" for r in message.content
    )


def placeholders_in(messages: Sequence[LLMMessage]) -> list[str]:
    """Every memory key referenced by ``[MemoryRef: ...]`` placeholders in ``messages`` (in order)."""
    keys: list[str] = []
    for msg in messages:
        texts: list[str] = []
        if isinstance(msg, FunctionExecutionResultMessage):
            texts = [r.content for r in msg.content]
        elif isinstance(msg.content, str):
            texts = [msg.content]
        elif isinstance(msg, UserMessage):
            texts = [p for p in msg.content if isinstance(p, str)]
        for text in texts:
            keys.extend(ref.key for ref in parse_memory_refs(text))
    return keys
