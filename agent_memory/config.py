"""Settings read from the environment (``AGENT_MEMORY_*``), in one place.

Example:
    >>> from agent_memory.config import Settings
    >>> Settings(home="/tmp/am").home.name
    'am'
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
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

    def resolved_home(self) -> Path:
        """The state directory with ``~`` expanded (not created)."""
        return self.home.expanduser()


def get_settings() -> Settings:
    """Read settings from the current environment (not cached: tests and CLI flags change env)."""
    return Settings()
