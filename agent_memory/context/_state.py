"""What a :class:`~agent_memory.context.MemoryContext` remembers (plain data; saved by the store wing).

The state is a list of :class:`ContextEntry`: each is a message as it was added, except that every big
piece of it (a slot: the string content, a text part of a multi-part user message, one function result)
was offloaded to the store and is described by an :class:`OffloadedPart` (key, token count, description,
excerpt). The state is plain JSON, so ``save_state()``/``load_state()`` round-trip through ``json.dumps``,
and :class:`agent_memory.store.ContextStates` keeps a thread's state (a header and one row per entry) keyed
by (user, thread, agent), so a resumed thread rebuilds exactly the same context.

Example:
    >>> from autogen_core.models import UserMessage
    >>> entry = ContextEntry(message=UserMessage(content="hi", source="user"))
    >>> ContextState(entries=[entry]).model_dump(mode="json")["entries"][0]["message"]["content"]
    'hi'
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

from autogen_core.models import LLMMessage, SystemMessage
from pydantic import BaseModel, Field

STATE_VERSION = 1


class OffloadedPart(BaseModel):
    """One big piece of a message, stored in ``agent_memories`` (or waiting to be, while the DB is down)."""

    slot: int
    """Where the piece sits: 0 for string content, the list index for multi-part user content and results."""
    key: str | None = None
    """The memory key; ``None`` while the store was unreachable (``pending_content`` holds the text)."""
    tokens: int
    description: str
    excerpt: str
    memory_type: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    first_use: str | None = None
    """What the model sees while the part is among the newest ``keep_recent_full`` (the full content when it
    fits ``first_use_max_tokens``, else a larger excerpt). Dropped once the part is compacted for good."""
    first_use_is_full: bool = False
    pending_content: str | None = None
    """The exact content, kept inline only while it could not be stored (database unreachable)."""
    identifiers: list[str] = Field(default_factory=list)
    """Identifiers of the description and tool arguments (file names, error codes...), matched against new
    user messages; the stored content itself is matched in SQL when a user message arrives."""
    compacted: bool = False
    """True once the part left the first-use window (its compact form is final)."""


class ReferencedItem(BaseModel):
    """A ``[MemoryRef: ...]`` that arrived inside a message (e.g. from an executor that offloads by itself)
    and was verified to be one of this user's memories. Anything else in a placeholder shape is plain text."""

    key: str
    description: str
    tokens: int
    memory_type: str


EntryKind = Literal["message", "expansion", "recall"]


class ContextEntry(BaseModel):
    """One message of the context; ``parts`` say which of its slots were offloaded."""

    id: int = -1
    """Stable id within the context (assigned when added): the row key of the entry in PostgreSQL."""
    message: LLMMessage
    parts: list[OffloadedPart] = Field(default_factory=list)
    kind: EntryKind = "message"
    """``message``: added by the caller. ``expansion``: an offloaded item expanded for one turn because the
    user referred to it (removed at the next user message). ``recall``: user memories found for an
    ambiguous request."""
    refs: list[ReferencedItem] = Field(default_factory=list)
    """This user's memories that the message's own text refers to (verified in SQL when it was added)."""
    archive_key: str | None = None
    """Key of the stored transcript span holding this message's text, once the budget made it drop out."""


class ContextState(BaseModel):
    """Everything needed to rebuild a context exactly (JSON-serialisable with ``model_dump(mode="json")``)."""

    version: int = STATE_VERSION
    entries: list[ContextEntry] = Field(default_factory=list)
    next_entry_id: int = 0
    user_layer: SystemMessage | None = None
    user_layer_keys: list[str] = Field(default_factory=list)
    user_layer_loaded: bool = False

    def assign_ids(self) -> None:
        """Give entries without an id (older states, AutoGen states) consecutive ids."""
        for entry in self.entries:
            if entry.id < 0:
                entry.id = self.next_entry_id
                self.next_entry_id += 1
            else:
                self.next_entry_id = max(self.next_entry_id, entry.id + 1)

    def header(self) -> dict[str, Any]:
        """The state without its entries (those are saved one row each)."""
        return self.model_dump(mode="json", exclude={"entries"})


class StateChanges:
    """What changed since the last save, so a save writes O(changes), not the whole conversation."""

    def __init__(self) -> None:
        self.replace_all = True  # the first save of a context object writes everything
        self.upserts: set[int] = set()
        self.deletes: set[int] = set()
        self.revision: int | None = None
        """Revision of the saved state this object last loaded or wrote; ``None``: unknown."""

    def touch(self, entry: ContextEntry) -> None:
        self.upserts.add(entry.id)
        self.deletes.discard(entry.id)

    def remove(self, entry: ContextEntry) -> None:
        self.deletes.add(entry.id)
        self.upserts.discard(entry.id)

    def everything(self) -> None:
        self.replace_all = True
        self.upserts.clear()
        self.deletes.clear()

    def clear(self) -> None:
        """Everything is saved (the revision stays: it is what the database now holds)."""
        self.replace_all = False
        self.upserts.clear()
        self.deletes.clear()


class EntryJson(Mapping[int, dict[str, Any]]):
    """The JSON of a state's entries by id, computed only for the ids read (a save writes only what changed)."""

    def __init__(self, entries: list[ContextEntry]) -> None:
        self._by_id = {e.id: e for e in entries}

    def __getitem__(self, entry_id: int) -> dict[str, Any]:
        return self._by_id[entry_id].model_dump(mode="json")

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)


def state_from_saved(header: dict[str, Any], entries: list[dict[str, Any]]) -> ContextState:
    """A state from its saved header and entry rows (states saved whole by earlier versions keep their
    entries inside the header)."""
    header = dict(header)
    legacy = header.pop("entries", None) or []
    state = ContextState.model_validate({**header, "entries": entries or legacy})
    state.assign_ids()
    return state
