"""MemoryContext: an AutoGen ``ChatCompletionContext`` that offloads big messages to the memory store.

Path of one big tool output (docs/architecture.md): ``add_message`` hands each piece of the message to the
one offloader (:mod:`._offload`), which counts its tokens (tiktoken) and, above
``offload_threshold_tokens``, stores the exact content (:meth:`MemoryStore.store`, one INSERT) and keeps a
placeholder ``[MemoryRef: <key> - <description> - <N> tokens]`` plus a short deterministic excerpt. The
newest ``keep_recent_full`` offloaded items are shown in full (up to ``first_use_max_tokens``) so the model
can read what it just asked for; older ones only in compact form (first use, then compact: the model reads a
fresh output once, later turns carry only its reference). ``get_messages`` assembles within
``token_budget`` without a database round trip (:mod:`._render`, :mod:`._budget`); the model reads any
part of an item again with ``retrieve_memory`` (:meth:`MemoryContext.retrieve`). The state of a
(user, thread) is saved to PostgreSQL after each change and :meth:`MemoryContext.resume` rebuilds it.

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
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Self, Unpack

from autogen_core import Component, FunctionCall
from autogen_core.model_context import ChatCompletionContext, ChatCompletionContextState
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    FunctionExecutionResultMessage,
    LLMMessage,
    UserMessage,
)

from ..models import MemoryItem
from ..placeholders import parse_memory_refs
from ..store import ContextStates, MemoryStore
from ..validation import check_identifier, check_user_id
from ._budget import build, late_notes_as_user_messages, plan
from ._config import MemoryContextConfig, MemoryContextSettings, carries_password
from ._offload import DB_UNAVAILABLE_ERRORS, Offloader, intercept
from ._recall import Recaller, candidates
from ._render import Renderer, text_of
from ._state import ContextEntry, ContextState, EntryJson, StateChanges, state_from_saved

log = logging.getLogger(__name__)


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
        **settings: the other settings of :class:`MemoryContextConfig` (defaults and bounds are there), typed by
            :class:`MemoryContextSettings`:

            first_use_max_tokens: the newest offloaded items are shown in full up to this size ("first use").
            keep_recent_full: how many of the newest offloaded items keep their first-use view.
            excerpt_max_tokens: size of the excerpt kept with each compacted placeholder.
            expansion_max_tokens: cap of an expansion (also at most a quarter of ``token_budget``).
            user_layer_max_tokens: budget of the user-layer system message (0 disables it).
            recall_on_ambiguity: search the user's preferences/facts for short vague requests.
            notes_after_conversation_start: the role of the context's notes (expansions, recalled memories,
                "earlier conversation omitted") that come after the first user or assistant message. ``user``
                (default) works with every model: many (Gemini, most local models, any model whose
                ``model_info`` lacks ``multiple_system_messages``) refuse system messages there. ``system``
                keeps them system messages, for models that take several.
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
        **settings: Unpack[MemoryContextSettings],
    ) -> None:
        unknown = sorted(set(settings) - MemoryContextSettings.__optional_keys__)  # for callers without a type checker
        if unknown:
            raise TypeError(f"MemoryContext got unexpected keyword argument(s): {', '.join(unknown)}")
        # Validated as data: the config turns any iterable of tool names into its sorted list.
        config = MemoryContextConfig.model_validate(
            dict(
                settings,
                user_id=check_user_id(user_id),
                agent_id=check_identifier(agent_id, "agent_id", optional=True),
                thread_id=check_identifier(thread_id, "thread_id", optional=True),
                offload_threshold_tokens=offload_threshold_tokens,
                token_budget=token_budget,
            )
        )
        super().__init__(config.initial_messages)
        self._config = config
        self._store = store
        self._owns_store = False
        self._skip_offload_tools = frozenset(config.skip_offload_tools)
        self._model_client = model_client
        self._offloader = Offloader(
            self.get_store,
            user_id=config.user_id,
            agent_id=config.agent_id,
            thread_id=config.thread_id,
            threshold_tokens=config.offload_threshold_tokens,
            excerpt_max_tokens=config.excerpt_max_tokens,
            first_use_max_tokens=config.first_use_max_tokens,
            model_client=model_client if config.llm_descriptions else None,
            llm_timeout_seconds=config.llm_timeout_seconds,
            offloaded_by="MemoryContext",
        )
        self._recall = Recaller(self.get_store, config, model_client)
        self._lock = asyncio.Lock()
        self._state = ContextState(entries=[ContextEntry(message=m) for m in config.initial_messages or []])
        self._state.assign_ids()
        self._changes = StateChanges()  # what the next save must write
        self._dirty = False  # state changed but not yet saved (database was unreachable)
        self._view: list[LLMMessage] | None = None  # get_messages() result until the next change
        self._retry_at = 0.0  # monotonic time before which get_messages() does not retry the database
        self._layer_fresh = False  # the user layer was (re)loaded by this object
        self._renderer = Renderer()  # first-use and compact renderings per entry, until the entry changes

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
            entry = await intercept(
                message, self._offloader, calls=self._recent_calls(), skip_tools=self._skip_offload_tools
            )
            if any(p.key is None for p in entry.parts):  # database down: get_messages() retries after a pause
                self._retry_at = time.monotonic() + self._config.retry_interval_seconds
            known = {p.key for e in self._state.entries for p in e.parts if p.key} | {p.key for p in entry.parts}
            entry.refs.extend(await self._recall.verified_refs(entry, {k for k in known if k}))
            self._append(entry)
            if entry.parts:
                self._advance_first_use_window()
            if isinstance(message, UserMessage):
                for note in await self._recall.notes_for(
                    text_of(message), candidates(self._state.entries, entry), self._state.user_layer_keys
                ):
                    self._append(note)
            self._view = None
            if self._config.token_budget is not None:
                await self._archive_dropped_spans(self._config.token_budget)
            await self._autosave()

    async def get_messages(self) -> list[LLMMessage]:
        """The conversation as the model should see it, within ``token_budget`` when set.

        No database round trip, except to offload pieces kept inline while the database was down.
        """
        if (self.pending_count or self._dirty) and time.monotonic() >= self._retry_at:
            async with self._lock:
                await self._flush_locked()
        if self._view is None:
            units = self._renderer.units(self._state)
            budget = self._config.token_budget
            view = [m for u in units for m in u.messages] if budget is None else build(units, plan(units, budget))
            if self._config.notes_after_conversation_start == "user":
                view = late_notes_as_user_messages(view)
            self._view = view
        return list(self._view)

    async def clear(self) -> None:
        """Forget the conversation (the stored memories stay in the store)."""
        async with self._lock:
            self._state = ContextState()
            self._renderer.forget()
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
            self._renderer.forget()
            self._changes.everything()
            self._view = None
            await self._autosave()

    @staticmethod
    def _parse_state(state: Mapping[str, Any]) -> ContextState:
        if "entries" in state:
            parsed = ContextState.model_validate(state)
        else:
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

    async def _saved_states(self) -> ContextStates:
        return ContextStates((await self.get_store()).db)

    async def load(self) -> bool:
        """Replace the state with the one saved for (user, thread, agent); ``False`` when none exists."""
        if self.thread_id is None:
            raise ValueError("load() needs a thread_id")
        saved = await (await self._saved_states()).load(self.user_id, self.thread_id, self.agent_id)
        if saved is None:
            return False
        loaded = state_from_saved(saved.header, saved.entries)
        async with self._lock:
            self._state = loaded
            self._renderer.forget()
            self._changes = StateChanges()
            self._changes.clear()
            self._changes.revision = saved.revision  # the database holds exactly this state, at this revision
            self._view = None
            self._dirty = False
        return True

    async def save(self) -> None:
        """Save the state for (user, thread, agent) now (``autosave`` does this after each change)."""
        if self.thread_id is None:
            raise ValueError("save() needs a thread_id")
        changes = self._changes
        changes.revision = await (await self._saved_states()).save(
            self.user_id,
            self.thread_id,
            self.agent_id,
            header=self._state.header(),
            entries=EntryJson(self._state.entries),
            changed=changes.upserts,
            deleted=changes.deletes,
            replace_all=changes.replace_all,
            revision=changes.revision,
        )
        changes.clear()
        self._dirty = False

    async def delete_saved_state(self) -> None:
        """Remove the saved state of (user, thread, agent) from the database."""
        if self.thread_id is None:
            return
        await (await self._saved_states()).delete(self.user_id, self.thread_id, self.agent_id)

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
                    await self._offloader.store_pending(part)
                except DB_UNAVAILABLE_ERRORS as exc:
                    log.info("database still unreachable (%s); %d piece(s) pending", exc, self.pending_count)
                    # get_messages() retries only after a pause, so a dead server does not slow every call.
                    self._retry_at = time.monotonic() + self._config.retry_interval_seconds
                    return
                self._touched(entry)
                self._view = None
                changed = True
        if changed or self._dirty:
            self._dirty = False
            await self._autosave()  # marks the state dirty again if the database is still away

    # ------------------------------------------------------------------ entries

    def _recent_calls(self) -> dict[str, FunctionCall]:
        """Function calls of the latest assistant call messages (to record a result's tool arguments)."""
        calls: dict[str, FunctionCall] = {}
        for entry in reversed(self._state.entries[-20:]):
            msg = entry.message
            if isinstance(msg, AssistantMessage) and isinstance(msg.content, list):
                for call in msg.content:
                    calls.setdefault(call.id, call)
        return calls

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
        self._renderer.forget(entry.id)
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

    async def _load_user_layer(self) -> None:
        """Load the user's standing memories (preferences, facts) once, as one system message."""
        if self._config.user_layer_max_tokens > 0:
            layer = await self._recall.user_layer()
            if layer is None:  # database unreachable: the next message tries again
                return
            self._state.user_layer, self._state.user_layer_keys = layer
        self._state.user_layer_loaded = True
        self._layer_fresh = True

    async def _archive_dropped_spans(self, budget: int) -> None:
        """Store the text of messages the budget now drops, as one ``conversation`` memory per new span."""
        dropped = self._renderer.dropped_span(self._state, budget)
        if dropped is None:
            return
        span, transcript, description = dropped
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

    # ------------------------------------------------------------------ component config

    def _to_config(self) -> MemoryContextConfig:
        config = self._config.model_copy()
        if config.database_url is None and self._store is not None:
            config.database_url = self._store.db.url
        if config.database_url is not None and carries_password(config.database_url):
            # Configs get shared and logged: never a password. Whoever loads the config opens the store from
            # AGENT_MEMORY_DATABASE_URL (or the embedded server), as with any config without a URL.
            log.info("database_url carries a password: left out of the component config")
            config.database_url = None
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
        settings = {name: value for name, value in config if name != "model_client"}  # fields as they are
        return cls(None, model_client=model_client, **settings)


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
