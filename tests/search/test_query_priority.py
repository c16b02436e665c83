"""A search query's embedding never waits behind the backlog of stored memories still being embedded."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agent_memory.search import SentenceTransformerEmbedder
from agent_memory.search._priority import QueriesFirst


def wait_for(condition, limit_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + limit_s
    while not condition():  # another thread's state: polled
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_a_waiting_query_goes_before_a_waiting_background_batch() -> None:
    turns = QueriesFirst()
    order: list[str] = []
    release = threading.Event()

    def background(name: str, hold: threading.Event | None = None) -> None:
        with turns.turn(query=False):
            order.append(name)
            if hold is not None:
                hold.wait(10)

    def query() -> None:
        with turns.turn(query=True):
            order.append("query")

    first = threading.Thread(target=background, args=("batch 1", release))
    first.start()
    wait_for(lambda: turns.busy)
    second = threading.Thread(target=background, args=("batch 2",))
    second.start()
    wait_for(lambda: turns.batches_waiting == 1)
    asking = threading.Thread(target=query)
    asking.start()
    wait_for(lambda: turns.queries_waiting == 1)
    release.set()
    for t in (first, second, asking):
        t.join(10)

    assert order == ["batch 1", "query", "batch 2"]


@pytest.mark.skipif(
    not SentenceTransformerEmbedder.available(),
    reason="local-embeddings extra (torch, sentence-transformers) not installed",
)
async def test_a_query_is_embedded_while_a_long_backlog_is_still_running() -> None:
    embedder = SentenceTransformerEmbedder()
    await embedder.embed_query("warm up")  # load the model outside the measured part
    backlog = [f"build log {n}: " + "compiled module and linked the binary without warnings " * 30 for n in range(48)]
    try:
        stored = asyncio.create_task(embedder.embed(backlog))
        await asyncio.to_thread(wait_for, lambda: embedder._turns.busy)  # the backlog has the model
        vector = await embedder.embed_query("which build failed")

        assert len(vector) == 384
        assert not stored.done(), "the query waited for the whole backlog"
        assert len(await stored) == 48
    finally:
        await embedder.close()
