"""Settings read from the environment (``AGENT_MEMORY_*``), in one place.

Example:
    >>> from agent_memory.config import Settings
    >>> Settings(home="/tmp/am").home.name
    'am'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Runtime configuration. Every field maps to an ``AGENT_MEMORY_<FIELD>`` environment variable."""

    model_config = SettingsConfigDict(env_prefix="AGENT_MEMORY_", extra="ignore")

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL. Unset: an embedded PostgreSQL server is started under `home`.",
    )
    home: Path = Field(default=Path("~/.agent-memory"), description="State directory (embedded database, secrets).")
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=10, ge=1)
    max_content_bytes: int = Field(
        default=256 * 1024 * 1024, ge=1, description="Largest content (UTF-8 bytes) accepted by `store`."
    )
    token_model: str = Field(default="gpt-4o", description="Model name that selects the tiktoken encoding.")
    # Dense retrieval (embedders in agent_memory.search). Default: none, lexical search only.
    embedder: Literal["none", "openai", "local"] = Field(
        default="none", description="none | openai (any OpenAI-compatible endpoint) | local (sentence-transformers)."
    )
    embedding_model: str | None = Field(default=None, description="Embedding model; None: the kind's default.")
    embedding_url: str | None = Field(default=None, description="OpenAI-compatible base URL; None: OPENAI_BASE_URL.")
    embedding_api_key: str | None = Field(default=None, description="None: OPENAI_API_KEY.")
    embedding_dimensions: int | None = Field(default=None, ge=1, description="Requested embedding dimension.")
    search_min_score: float = Field(
        default=0.15,
        ge=0.0,
        le=1.0,
        description="Hits scoring below this are dropped (an unrelated query gets few or none).",
    )
    ttl_days: dict[str, float] = Field(
        default_factory=dict,
        description='Days a memory of each type lives unless stored with its own expiry, e.g. {"command_output": 30}.',
    )

    grep_timeout_seconds: float = Field(
        default=2.0,
        gt=0,
        le=600,
        description="Longest one grep over a memory may run; a costlier pattern is stopped with a clear error.",
    )

    statement_timeout_seconds: float = Field(
        default=30.0,
        ge=0,
        description="Longest one database statement may run before it is cancelled with a clear error (0: none).",
    )

    database_pooler: Literal["none", "pgbouncer"] = Field(
        default="none",
        description="'pgbouncer': the URL is a PgBouncer in transaction mode (no prepared-statement cache, no "
        "startup parameters; the statement timeout is then enforced by the client only).",
    )

    partitions: int = Field(
        default=0,
        ge=0,
        le=1024,
        description="Hash-partition agent_memories by user into this many partitions when the schema is created "
        "on an empty database (0: one plain table). An existing database keeps its layout.",
    )

    runs_memory_mb: int | None = Field(
        default=None,
        ge=64,
        description="Memory all sandboxed runs of this machine may hold together, as root (cgroup agent-memory); "
        "unset: half of the machine's memory, so PostgreSQL and the UI keep the rest.",
    )

    def resolved_home(self) -> Path:
        """The state directory with ``~`` expanded (not created)."""
        return self.home.expanduser()


HEADER_AUTH_ENV = "AGENT_MEMORY_UI_HEADER_AUTH"


def header_auth_enabled() -> bool:
    """Whether ``AGENT_MEMORY_UI_HEADER_AUTH`` turns on UI login from a trusted proxy header (1/true/yes/on).

    Read by both the ``agent-memory ui`` command and the Chainlit app; any other value means off.
    """
    return os.environ.get(HEADER_AUTH_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class SettingsError(ValueError):
    """An ``AGENT_MEMORY_*`` environment variable holds a value agent-memory cannot use."""


def get_settings() -> Settings:
    """Read settings from the current environment (not cached: tests and CLI flags change env).

    Raises :class:`SettingsError` naming each bad variable, its value and what it should be.
    """
    try:
        return Settings()
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            variable = f"AGENT_MEMORY_{field.upper()}"
            problems.append(f"{variable}={os.environ.get(variable, '')!r}: {error['msg']}")
        raise SettingsError("bad setting: " + "; ".join(problems)) from None
