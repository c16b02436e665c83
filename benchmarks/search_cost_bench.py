"""What one user's costly searches cost: pasted hundreds-of-words queries, and a flood of them at once.

One user holds 5 logs of ~9 MB full of numeric ids (150,000 lines each); another user holds one note. Lexical
search (the default install), end to end through ``MemoryStore.search``. Each measurement runs twice in this
process on the same data: as shipped (lexical ranking reads a query's first ``MAX_QUERY_WORDS`` words; at most
``SEARCH_SLOTS_PER_USER`` searches of one user at a time) and with those bounds lifted, the baseline.

- single queries: 600 hex words, 300 ``idN`` words, a quoted 600-word phrase (3 rounds each, seconds);
- a flood: 12 concurrent quoted 600-word phrases from the costly user while the other user lists their
  memories 10 times; the other user's worst ``list`` latency and the flood's wall time.

    python benchmarks/search_cost_bench.py            # prints the table
    python benchmarks/search_cost_bench.py --write    # ... and writes it into benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import machine, publish, throwaway_database_url

from agent_memory import MemoryStore
from agent_memory.config import Settings
from agent_memory.search import _hybrid
from agent_memory.store._slots import PerUserSlots

COSTLY, OTHER = "costly-user", "other-user"
PHRASE = '"' + " ".join(f"user{i}" for i in range(600)) + '"'
QUERIES = {
    "600 hex words": " ".join(f"{i:x}" for i in range(4096, 4696)),
    "300 idN words": " ".join(f"id{i}" for i in range(300)),
    "quoted 600-word phrase": PHRASE,
}
ROUNDS = 3


def big_log(seed: int) -> str:
    rnd = random.Random(seed)
    line = "2026-11-26T00:{:02d} req={:012x} id{} user{} took {}ms\n"
    return "".join(line.format(i % 60, rnd.getrandbits(48), i, i % 997, rnd.randint(1, 99999)) for i in range(150_000))


@contextmanager
def unbounded(store: MemoryStore) -> Iterator[None]:
    """The baseline: every word of a query read, and no per-user limit on parallel searches."""
    words, fts, slots = _hybrid.MAX_QUERY_WORDS, _hybrid._FTS, store.search_slots
    lexemes = f"LIMIT {_hybrid.MAX_QUERY_LEXEMES}) w"
    assert lexemes in fts, "the lexeme bound moved: update this baseline"
    _hybrid.MAX_QUERY_WORDS = 10**6
    _hybrid._FTS = fts.replace(lexemes, "LIMIT 1000000) w")  # built into the statement: rebuild it
    _hybrid._SQL_CACHE.clear()
    store.search_slots = PerUserSlots(10**6)
    try:
        yield
    finally:
        _hybrid.MAX_QUERY_WORDS, _hybrid._FTS, store.search_slots = words, fts, slots
        _hybrid._SQL_CACHE.clear()


async def single(store: MemoryStore) -> dict[str, float]:
    out = {}
    for name, query in QUERIES.items():
        times = []
        for _ in range(ROUNDS):
            t = time.perf_counter()
            await store.search(query, user_id=COSTLY, limit=5)
            times.append(time.perf_counter() - t)
        out[name] = sorted(times)[len(times) // 2]
    return out


async def flood(store: MemoryStore) -> tuple[float, float]:
    async def costly() -> None:
        await store.search(PHRASE, user_id=COSTLY, limit=5)

    async def other() -> float:
        worst = 0.0
        for _ in range(10):
            t = time.perf_counter()
            await store.list(user_id=OTHER)
            worst = max(worst, time.perf_counter() - t)
            await asyncio.sleep(0.1)  # a user clicking around, not a measurement wait
        return worst

    t0 = time.perf_counter()
    *_, worst = await asyncio.gather(*(costly() for _ in range(12)), other())
    return worst, time.perf_counter() - t0


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    url = await throwaway_database_url(args.url)
    # The lifted baseline runs queries for seconds: no statement timeout may cut them short.
    settings = Settings(database_url=url, embedder="none", statement_timeout_seconds=0)
    store = await MemoryStore.open(url, settings=settings)
    for seed in range(5):
        await store.store(big_log(seed), user_id=COSTLY, description=f"big log {seed}", memory_type="command_output")
    await store.store("a note", user_id=OTHER)
    await store.db.pool.execute("ANALYZE agent_memories")
    bounded_single, bounded_flood = await single(store), await flood(store)
    with unbounded(store):
        lifted_single, lifted_flood = await single(store), await flood(store)
    await store.close()

    lines = [
        "## Costly searches of one user (issue 17) — `benchmarks/search_cost_bench.py`",
        "",
        f"`python benchmarks/search_cost_bench.py --write` ({machine()}, load {os.getloadavg()[0]:.1f}): one user "
        "with 5 logs of ~9 MB (numeric ids), another user with one note; lexical search. Shipped: lexical ranking "
        f"reads a query's first {_hybrid.MAX_QUERY_WORDS} words, and one user's searches run "
        "at most two at a time per process. Baseline: both bounds lifted, same process, same data.",
        "",
        "| measurement | shipped | baseline (bounds lifted) |",
        "|---|---:|---:|",
    ]
    for name in QUERIES:
        lines.append(f"| {name}, median of {ROUNDS} (s) | {bounded_single[name]:.2f} | {lifted_single[name]:.2f} |")
    lines.append(f"| flood of 12: other user's worst `list` (ms) | {bounded_flood[0] * 1000:.0f} | "
                 f"{lifted_flood[0] * 1000:.0f} |")  # fmt: skip
    lines.append(f"| flood of 12: wall time (s) | {bounded_flood[1]:.1f} | {lifted_flood[1]:.1f} |")
    publish("search-cost", lines, write=args.write)


if __name__ == "__main__":
    asyncio.run(main())
