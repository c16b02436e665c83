"""Token accounting and budget assembly for :class:`~agent_memory.context.MemoryContext`.

``assemble`` turns rendered messages into a conversation that fits ``token_budget`` without touching the
database: it first compacts first-use views (oldest first), then drops the oldest spans, never a leading
system message, never a function call without its results (and vice versa), and leaves a note with the
memory keys a dropped span held so no placeholder disappears silently.

Example:
    >>> from autogen_core.models import SystemMessage, UserMessage
    >>> msgs = [SystemMessage(content="be brief")] + [UserMessage(content="word " * 50, source="u")] * 4
    >>> units = [Unit(messages=[m], tokens=message_tokens(m), pinned=m.type == "SystemMessage") for m in msgs]
    >>> out = assemble(units, budget=150)
    >>> out[0].content, out[1].content.startswith("[Earlier conversation omitted")
    ('be brief', True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from autogen_core import Image
from autogen_core.models import (
    AssistantMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)

from ..tokens import count_tokens

# Per-message framing as the OpenAI chat format counts it (role, separators); tool results and calls
# also carry their call id. Slightly generous so a budget we meet is met by the API's count too.
MESSAGE_OVERHEAD = 4
CALL_OVERHEAD = 12
IMAGE_TOKENS = 85 * 4  # a low-detail estimate; images are never offloaded


def text_tokens(text: str, model: str | None = None) -> int:
    return count_tokens(text, model) if text else 0


def message_tokens(message: LLMMessage, model: str | None = None) -> int:
    """Tokens the message costs in an OpenAI chat request (content plus framing)."""
    total = MESSAGE_OVERHEAD
    if isinstance(message, SystemMessage):
        total += text_tokens(message.content, model)
    elif isinstance(message, UserMessage):
        if isinstance(message.content, str):
            total += text_tokens(message.content, model)
        else:
            for part in message.content:
                total += IMAGE_TOKENS if isinstance(part, Image) else text_tokens(part, model)
        total += text_tokens(message.source, model)
    elif isinstance(message, AssistantMessage):
        if isinstance(message.content, str):
            total += text_tokens(message.content, model)
        else:
            for call in message.content:
                total += 2 * CALL_OVERHEAD + text_tokens(call.id, model)
                total += text_tokens(call.name, model) + text_tokens(call.arguments, model)
        if message.thought:
            total += text_tokens(message.thought, model)
        total += text_tokens(message.source, model)
    else:
        for result in message.content:
            total += CALL_OVERHEAD + text_tokens(result.content, model) + text_tokens(result.call_id, model)
    return total


@dataclass
class Unit:
    """Messages that must stay together (a function call and its results), with their rendering options.

    ``compact`` is an alternative rendering (first-use views replaced by compact forms) used under budget
    pressure; ``keys`` are the memory keys the unit's placeholders refer to and ``archive_keys`` the stored
    transcripts that hold the unit's own text, both named by the note that replaces a dropped span.
    """

    messages: list[LLMMessage]
    tokens: int
    compact: list[LLMMessage] | None = None
    compact_tokens: int | None = None
    keys: list[str] = field(default_factory=list)
    archive_keys: list[str] = field(default_factory=list)
    pinned: bool = False


@dataclass
class Plan:
    """Which units are shown compacted and which are dropped (oldest first)."""

    use_compact: list[bool]
    dropped: list[int]


def omitted_note(n_messages: int, keys: Sequence[str], archive_keys: Sequence[str] = ()) -> SystemMessage:
    text = f"[Earlier conversation omitted to fit the context budget: {n_messages} message(s)."
    if archive_keys:
        text += f" Their full text is stored as {', '.join(dict.fromkeys(archive_keys))}."
    keys = list(dict.fromkeys(keys))
    if keys:
        shown = ", ".join(keys[:50])
        more = f" and {len(keys) - 50} more" if len(keys) > 50 else ""
        text += f" They referred to stored memories {shown}{more}."
    if keys or archive_keys:
        text += " Use retrieve_memory(key) to read any of them."
    return SystemMessage(content=text + "]")


def _note_for(units: Sequence[Unit], dropped: Sequence[int]) -> SystemMessage:
    return omitted_note(
        sum(len(units[d].messages) for d in dropped),
        [k for d in dropped for k in units[d].keys],
        [k for d in dropped for k in units[d].archive_keys],
    )


def plan(units: Sequence[Unit], budget: int, *, note_tokens: Callable[[SystemMessage], int] = message_tokens) -> Plan:
    """Decide compaction and dropping for ``budget`` (see the module docstring for the rules)."""
    use_compact = [False] * len(units)

    def size(i: int) -> int:
        u = units[i]
        return u.compact_tokens if use_compact[i] and u.compact_tokens is not None else u.tokens

    total = sum(size(i) for i in range(len(units)))
    # 1. Compact first-use views, oldest first (the newest unit last).
    for i in range(len(units)):
        if total <= budget:
            break
        u = units[i]
        if u.compact is not None and u.compact_tokens is not None and u.compact_tokens < u.tokens:
            use_compact[i] = True
            total -= u.tokens - u.compact_tokens
    # 2. Drop the oldest droppable units; one note stands for the whole dropped span. The note's size is
    #    estimated generously while dropping and checked exactly at the end.
    dropped: list[int] = []
    droppable = [i for i in range(len(units) - 1) if not units[i].pinned]
    n_keys = 0
    for i in droppable:
        estimate = 0 if not dropped else 80 + 14 * n_keys
        if total + estimate <= budget:
            if not dropped or total + note_tokens(_note_for(units, dropped)) <= budget:
                break
        dropped.append(i)
        total -= size(i)
        n_keys += len(units[i].keys) + len(units[i].archive_keys)
    # 3. Still over (one huge newest unit): compact it too.
    last = len(units) - 1
    note_cost = note_tokens(_note_for(units, dropped)) if dropped else 0
    if total + note_cost > budget and last >= 0 and units[last].compact is not None:
        use_compact[last] = True
    return Plan(use_compact=use_compact, dropped=dropped)


def build(units: Sequence[Unit], chosen: Plan) -> list[LLMMessage]:
    """The messages of ``units`` as ``chosen`` says, with one note in place of the dropped span."""
    out: list[LLMMessage] = []
    dropped_set = set(chosen.dropped)
    note_placed = False
    for i, u in enumerate(units):
        if i in dropped_set:
            if not note_placed:
                out.append(_note_for(units, chosen.dropped))
                note_placed = True
            continue
        msgs = u.compact if chosen.use_compact[i] and u.compact is not None else u.messages
        out.extend(msgs)
    return out


def assemble(
    units: list[Unit],
    budget: int | None,
    *,
    note_tokens: Callable[[SystemMessage], int] = message_tokens,
) -> list[LLMMessage]:
    """Messages of ``units`` within ``budget`` tokens (see the module docstring for the rules).

    The newest unit is always kept, even when it alone exceeds the budget (the caller's caps keep that
    rare); pinned units (leading system messages, the user layer) are always kept.
    """
    if budget is None:
        return [m for u in units for m in u.messages]
    return build(units, plan(units, budget, note_tokens=note_tokens))


def late_notes_as_user_messages(messages: Sequence[LLMMessage]) -> list[LLMMessage]:
    """System messages after the first non-system one, turned into user messages from ``memory``.

    Leading system messages stay: the agent's own system message comes right before them, and every client
    merges one contiguous block. Later ones break models that accept a single system message (AutoGen raises
    "Multiple and Not continuous system messages are not supported").
    """
    started = False
    out: list[LLMMessage] = []
    for message in messages:
        if isinstance(message, SystemMessage) and started:
            out.append(UserMessage(content=message.content, source="memory"))
            continue
        started = started or not isinstance(message, SystemMessage)
        out.append(message)
    return out
