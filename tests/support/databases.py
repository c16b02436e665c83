"""A fresh, empty database on the test server for tests that need one of their own (dropped afterwards)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from agent_memory import MemoryStore
from agent_memory.config import Settings


@asynccontextmanager
async def fresh_database(server_url: str, prefix: str = "am_test") -> AsyncIterator[str]:
    """Create a database named ``<prefix>_<random>`` on the server of ``server_url``; yield its URL (the
    same server, credentials and options); drop it, connections and all, on exit."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(server_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    finally:
        conn = await asyncpg.connect(server_url)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


async def open_store(database_url: str, **settings: Any) -> MemoryStore:
    """A MemoryStore on ``database_url`` whose settings name that URL too (not the environment's), and ``settings``."""
    return await MemoryStore.open(database_url, settings=Settings(database_url=database_url, **settings))
