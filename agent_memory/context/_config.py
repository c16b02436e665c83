"""The settings of a :class:`~agent_memory.context.MemoryContext`, listed once (its AutoGen component config).

``MemoryContext(store, user_id, ..., **settings)`` validates its keyword settings with this model, and
``MemoryContext.load_component`` builds the context from it, so a setting, its default and its bounds are
written here and nowhere else. :class:`MemoryContextSettings` lists the same keyword settings for type
checkers (``**settings: Unpack[MemoryContextSettings]``); a test keeps the two lists equal.

Example:
    >>> MemoryContextConfig(user_id="alice", skip_offload_tools={"b_tool", "a_tool"}).skip_offload_tools
    ['a_tool', 'b_tool']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, TypedDict
from urllib.parse import parse_qsl, urlsplit

from autogen_core import ComponentModel
from autogen_core.models import LLMMessage
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..tools import MEMORY_TOOL_NAMES


class MemoryContextConfig(BaseModel):
    """Declarative configuration of a :class:`MemoryContext` (AutoGen component config).

    The store is referenced, not serialised: ``database_url`` (``None``: ``AGENT_MEMORY_DATABASE_URL`` or
    the embedded server) is opened on first use. See :class:`MemoryContext` for what each setting does.
    """

    model_config = ConfigDict(extra="forbid")

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
    notes_after_conversation_start: Literal["user", "system"] = "user"
    autosave: bool = True
    llm_descriptions: bool = True
    llm_judge: bool = False
    llm_timeout_seconds: float = Field(default=10.0, gt=0)
    retry_interval_seconds: float = Field(default=5.0, ge=0)
    database_url: str | None = None
    model_client: ComponentModel | None = None
    initial_messages: list[LLMMessage] | None = None
    skip_offload_tools: list[str] = Field(default_factory=lambda: sorted(MEMORY_TOOL_NAMES))

    @field_validator("skip_offload_tools", mode="before")
    @classmethod
    def _sorted_names(cls, value: Iterable[str]) -> list[str]:
        # Any iterable of names (a frozenset such as MEMORY_TOOL_NAMES); sorted so configs compare and dump stably.
        return sorted(value)


class MemoryContextSettings(TypedDict, total=False):
    """The keyword settings of ``MemoryContext(...)`` beyond its named parameters, for type checkers.

    Exactly the fields of :class:`MemoryContextConfig` that ``MemoryContext.__init__`` does not name (defaults,
    bounds and meaning are there); ``skip_offload_tools`` takes any iterable of names, as the config does.
    """

    first_use_max_tokens: int
    keep_recent_full: int
    excerpt_max_tokens: int
    expansion_max_tokens: int
    user_layer_max_tokens: int
    recall_on_ambiguity: bool
    notes_after_conversation_start: Literal["user", "system"]
    autosave: bool
    llm_descriptions: bool
    llm_judge: bool
    llm_timeout_seconds: float
    retry_interval_seconds: float
    database_url: str | None
    initial_messages: list[LLMMessage] | None
    skip_offload_tools: Iterable[str]


def carries_password(url: str) -> bool:
    """True when ``url`` holds a password, in its user part or as a ``password=`` query parameter.

    >>> carries_password("postgresql://me:secret@db/mem"), carries_password("postgresql://db/mem?password=x")
    (True, True)
    >>> carries_password("postgresql://me@db/mem?sslmode=require")
    False
    """
    parts = urlsplit(url)
    return parts.password is not None or any(k.lower() == "password" for k, _ in parse_qsl(parts.query))
