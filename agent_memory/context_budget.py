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
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)

from .tokens import count_tokens

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
                total += CALL_OVERHEAD + text_tokens(call.name, model) + text_tokens(call.arguments, model)
        if message.thought:
            total += text_tokens(message.thought, model)
    else:
        for result in message.content:
            total += CALL_OVERHEAD + text_tokens(result.content, model)
    return total


@dataclass
class Unit:
    """Messages that must stay together (a function call and its results), with their rendering options.

    ``compact`` is an alternative rendering (first-use views replaced by compact forms) used under budget
    pressure; ``keys`` are the memory keys the unit's placeholders refer to (for the dropped-span note).
    """

    messages: list[LLMMessage]
    tokens: int
    compact: list[LLMMessage] | None = None
    compact_tokens: int | None = None
    keys: list[str] = field(default_factory=list)
    pinned: bool = False


def group_units(messages: Sequence[LLMMessage]) -> list[list[int]]:
    """Indices of ``messages`` grouped so an assistant function-call message and the result messages that
    follow it form one group; every other message is its own group."""
    groups: list[list[int]] = []
    i = 0
    while i < len(messages):
        group = [i]
        msg = messages[i]
        if isinstance(msg, AssistantMessage) and isinstance(msg.content, list):
            j = i + 1
            while j < len(messages) and isinstance(messages[j], FunctionExecutionResultMessage):
                group.append(j)
                j += 1
            i = j
        else:
            i += 1
        groups.append(group)
    return groups


def omitted_note(n_messages: int, keys: Sequence[str]) -> SystemMessage:
    text = f"[Earlier conversation omitted to fit the context budget: {n_messages} message(s)."
    if keys:
        shown = ", ".join(keys[:50])
        more = f" and {len(keys) - 50} more" if len(keys) > 50 else ""
        text += f" They referred to stored memories {shown}{more}; use retrieve_memory(key) to read them."
    return SystemMessage(content=text + "]")


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
    # 2. Drop the oldest droppable units; one note stands for the whole dropped span.
    dropped: list[int] = []
    droppable = [i for i in range(len(units) - 1) if not units[i].pinned]
    note: SystemMessage | None = None
    note_cost = 0
    for i in droppable:
        if total + note_cost <= budget:
            break
        dropped.append(i)
        total -= size(i)
        keys = [k for d in dropped for k in units[d].keys]
        note = omitted_note(sum(len(units[d].messages) for d in dropped), keys)
        note_cost = note_tokens(note)
    # 3. Still over (one huge newest unit): compact it too.
    last = len(units) - 1
    if total + note_cost > budget and last >= 0 and units[last].compact is not None:
        use_compact[last] = True
    out: list[LLMMessage] = []
    dropped_set = set(dropped)
    note_placed = False
    for i, u in enumerate(units):
        if i in dropped_set:
            if not note_placed and note is not None:
                out.append(note)
                note_placed = True
            continue
        msgs = u.compact if use_compact[i] and u.compact is not None else u.messages
        out.extend(msgs)
    return out
