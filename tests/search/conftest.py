"""Fixtures of the search tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.embedding_stub import StubServer, serve_stub


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """The stand-in embedding endpoint (see ``support.embedding_stub``)."""
    with serve_stub() as server:
        yield server
