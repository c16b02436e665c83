"""How a context's entries become the messages the model sees, grouped into budget units.

Each entry renders twice: its first-use form (the newest offloaded items in full or as a large excerpt) and
its compact form (placeholder + short excerpt); both and their token counts are cached per entry until the
entry changes, so ``get_messages`` assembles a conversation without recounting it. Units keep a function
call with its results (the OpenAI API refuses one without the other); :mod:`._budget` decides which units
are compacted or dropped. Messages a budget drops are archived as one transcript (:func:`dropped_span`).

Example:
    >>> from autogen_core.models import UserMessage
    >>> from ._state import ContextEntry, ContextState
    >>> state = ContextState(entries=[ContextEntry(message=UserMessage(content="hi", source="user"))])
    >>> state.assign_ids()
    >>> [u.messages[0].content for u in Renderer().units(state)]
    ['hi']
"""

from __future__ import annotations

from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)

from ._budget import Unit, message_tokens, plan
from ._compaction import printable
from ._offload import part_text
from ._state import ContextEntry, ContextState

Rendering = tuple[LLMMessage, int, LLMMessage, int]
"""(first-use rendering, its tokens, compact rendering, its tokens)."""


def text_of(message: LLMMessage) -> str:
    """The user-visible text of a user message (text parts joined)."""
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return message.content
        return "\n".join(p for p in message.content if isinstance(p, str))
    return ""


def render_message(entry: ContextEntry, compact: bool) -> LLMMessage:
    """The entry's message with each offloaded slot filled by its first-use or compact text."""
    msg = entry.message
    if not entry.parts:
        return msg
    texts = {p.slot: part_text(p, compact) for p in entry.parts}
    if isinstance(msg, FunctionExecutionResultMessage):
        return FunctionExecutionResultMessage(
            content=[r.model_copy(update={"content": texts[i]}) if i in texts else r for i, r in enumerate(msg.content)]
        )
    if isinstance(msg, UserMessage) and isinstance(msg.content, list):
        pieces = [texts.get(i, piece) if isinstance(piece, str) else piece for i, piece in enumerate(msg.content)]
        return msg.model_copy(update={"content": pieces})
    return msg.model_copy(update={"content": texts[0]})


def leading_system_count(entries: list[ContextEntry]) -> int:
    """How many entries at the start are the caller's system messages (pinned: never dropped)."""
    i = 0
    while i < len(entries) and isinstance(entries[i].message, SystemMessage) and entries[i].kind == "message":
        i += 1
    return i


def entry_groups(entries: list[ContextEntry]) -> list[list[ContextEntry]]:
    """Entries after the leading system messages, a function call grouped with its results."""
    i = leading_system_count(entries)
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


class Renderer:
    """Renders entries (cached by entry id until :meth:`forget`) and builds the budget units of a state."""

    def __init__(self) -> None:
        self._cache: dict[int, Rendering] = {}

    def forget(self, entry_id: int | None = None) -> None:
        """Drop the cached rendering of one entry (it changed), or of all."""
        if entry_id is None:
            self._cache.clear()
        else:
            self._cache.pop(entry_id, None)

    def render(self, entry: ContextEntry) -> Rendering:
        cached = self._cache.get(entry.id)
        if cached is not None:
            return cached
        full = render_message(entry, compact=False)
        compact = render_message(entry, compact=True) if entry.parts else full
        full_tokens = message_tokens(full)
        compact_tokens = message_tokens(compact) if compact is not full else full_tokens
        result = (full, full_tokens, compact, compact_tokens)
        self._cache[entry.id] = result
        return result

    def units(self, state: ContextState) -> list[Unit]:
        """Entries as budget units: leading system messages and the user layer pinned, calls with results."""
        entries = state.entries
        units: list[Unit] = []
        for entry in entries[: leading_system_count(entries)]:
            full, tokens, _, _ = self.render(entry)
            units.append(Unit(messages=[full], tokens=tokens, pinned=True))
        if state.user_layer is not None:
            layer = state.user_layer
            units.append(Unit(messages=[layer], tokens=message_tokens(layer), pinned=True))
        for group in entry_groups(entries):
            rendered = [self.render(e) for e in group]
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

    def dropped_span(self, state: ContextState, budget: int) -> tuple[list[ContextEntry], str, str] | None:
        """Messages the budget now drops that are not archived yet: (entries, transcript, description).

        Offloaded pieces are already in the store; the transcript keeps the rest (small user requests, short
        tool results, answers) so nothing leaves the context unrecoverable.
        """
        units = self.units(state)
        dropped = plan(units, budget).dropped
        if not dropped:
            return None
        # Map units back to entries: pinned units come first and are never dropped.
        groups = entry_groups(state.entries)
        offset = len(units) - len(groups)
        span = [e for d in dropped for e in groups[d - offset] if e.kind == "message" and e.archive_key is None]
        if not span:
            return None
        transcript = "\n".join(transcript_line(self.render(e)[2]) for e in span)
        # A derived transcript, not user content: lone surrogates (which the store refuses) become escapes.
        transcript = transcript.encode("utf-8", "backslashreplace").decode("utf-8")
        first_user = next((text_of(e.message) for e in span if isinstance(e.message, UserMessage)), "")
        description = f"conversation span of {len(span)} message(s) omitted from the context"
        if first_user.strip():
            description += f", starting: {' '.join(printable(first_user).split())[:60]}"
        return span, transcript, description


def transcript_line(message: LLMMessage) -> str:
    """One message as plain text for a stored conversation span."""
    if isinstance(message, SystemMessage):
        return f"[system]: {message.content}"
    if isinstance(message, UserMessage):
        return f"[user {message.source}]: {text_of(message)}"
    if isinstance(message, AssistantMessage):
        if isinstance(message.content, str):
            return f"[assistant {message.source}]: {message.content}"
        calls = "; ".join(f"{c.name}({c.arguments}) id={c.id}" for c in message.content)
        return f"[assistant {message.source} calls]: {calls}"
    return "\n".join(
        f"[tool result {r.name} id={r.call_id}{' error' if r.is_error else ''}]: {r.content}" for r in message.content
    )
