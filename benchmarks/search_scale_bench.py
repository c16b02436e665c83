"""Search latency when many users share the tables: the user's own terms, other users' terms, nothing, typos.

One user holds N memories (default 10,000), ten other users hold N/10 each. Every other user has words of their
own (a project name, a host prefix) in all their rows; the measured user has none of them. Lexical search (the
default install: no embedder), end to end through ``MemoryStore.search``.

The same data is searched twice in one process: with the user-first text indexes that schema version 9 builds
when ``btree_gin`` exists (``GIN (user_id, search_vector)``), and with the shared indexes of earlier versions
(``GIN (search_vector)``), so the ratio between them is measured on this machine, in this run. Every result is
checked to belong to the asking user.

    python benchmarks/search_scale_bench.py                      # N = 10,000; prints the table
    python benchmarks/search_scale_bench.py --size 100000 --write
    python benchmarks/search_scale_bench.py --embedder local --write   # hybrid: MiniLM (the local-embeddings extra)

With ``--embedder local`` every memory gets its MiniLM vector first (``MemoryStore.reindex``), and each search
embeds its query (hybrid: full-text, dense, trigram when nothing else matched, the profile lane), with the
user-first indexes only.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "retrieval"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import machine, percentile, publish, throwaway_database_url
from run_latency import corpus

from agent_memory import MemoryStore
from agent_memory.config import Settings

USER = "scale-user"
OTHERS = [f"scale-other-{i}" for i in range(10)]
# Words only other users have: each other user works on one of these projects on hosts with these prefixes.
OTHER_WORDS = ["quillfeather", "marrowstone", "ashgrove", "tidewell", "brackenfold",
               "corvidae", "lumenreach", "saltmarsh", "ironbloom", "wyrmgate"]  # fmt: skip
QUERIES = {
    "own terms": ["disk full", "npm ERR ERESOLVE", "upstream timed out nginx", "pytest failed assertion",
                  "connection refused postgres", "out of memory killed"],
    "other users' terms": [f"{w} deploy" for w in OTHER_WORDS[:6]],
    "nothing matching": ["xylophone quartermaster", "hovercraft eels", "zeugma syzygy", "plinth obelisk",
                         "marzipan gazebo", "kumquat trebuchet"],
    "typos": ["dsik ful", "conection refsued", "upstrem timout", "memroy kiled", "pytset faild", "npm eresolv"],
}  # fmt: skip
ROUNDS = 15


async def bulk_insert(store: MemoryStore, user: str, rows: list[tuple[str, str, str]], tag: str) -> None:
    await store.db.pool.execute('INSERT INTO "User" (identifier) VALUES ($1) ON CONFLICT DO NOTHING', user)
    for i in range(0, len(rows), 5000):
        part = rows[i : i + 5000]
        await store.db.pool.execute(
            """
            INSERT INTO agent_memories (user_id, memory_key, memory_type, description, content, token_count,
                                        char_count, content_sha256)
            SELECT (SELECT id FROM "User" WHERE identifier = $1), k, t, d, c, length(c) / 4, length(c), h
            FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS x(k, t, d, c, h)
            """,
            user, [f"{tag}_{i + j:08d}" for j in range(len(part))], [r[2] for r in part], [r[1] for r in part],
            [r[0] for r in part], [hashlib.sha256(r[0].encode()).hexdigest() for r in part],
        )  # fmt: skip


async def timed(store: MemoryStore) -> dict[str, tuple[list[float], int]]:
    owned = {
        r["memory_key"]
        for r in await store.db.pool.fetch(
            'SELECT memory_key FROM agent_memories m JOIN "User" u ON u.id = m.user_id WHERE u.identifier = $1', USER
        )
    }
    out: dict[str, tuple[list[float], int]] = {}
    for kind, queries in QUERIES.items():
        for q in queries:  # warm-up
            await store.search(q, user_id=USER)
        samples: list[float] = []
        foreign = 0
        for _ in range(ROUNDS):
            for q in queries:
                t = time.perf_counter()
                items = await store.search(q, user_id=USER, limit=5)
                samples.append(time.perf_counter() - t)
                foreign += sum(1 for i in items if i.memory_key not in owned)
        out[kind] = (samples, foreign)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url")
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--embedder", choices=["none", "local"], default="none")
    args = ap.parse_args()
    url = await throwaway_database_url(args.url)
    store = await MemoryStore.open(url, settings=Settings(database_url=url, embedder=args.embedder))
    rng = random.Random(5)
    t0 = time.perf_counter()
    await bulk_insert(store, USER, corpus(args.size, 1), "own")
    for n, (other, word) in enumerate(zip(OTHERS, OTHER_WORDS, strict=True)):
        rows = [(f"{c}\nproject {word} on {word}-node-{rng.randint(1, 9)}", f"{d} ({word})", t)
                for c, d, t in corpus(args.size // 10, 100 + n)]  # fmt: skip
        await bulk_insert(store, other, rows, f"o{n}")
    await store.db.pool.execute("VACUUM ANALYZE agent_memories")
    print(f"loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if args.embedder != "none":
        t0 = time.perf_counter()
        report = await store.reindex(progress=lambda done, total: print(f"\rembedded {done}/{total}", end="",
                                                                         file=sys.stderr))  # fmt: skip
        print(f"\n{report} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        await store.db.pool.execute("VACUUM ANALYZE")  # as autovacuum would after 20,000 new vectors
        await publish_hybrid(store, args)
        return
    user_first = await timed(store)
    async with store.db.pool.acquire() as conn:  # the shared indexes of schema versions 1-8
        await conn.execute("SET maintenance_work_mem = '512MB'")
        await conn.execute("CREATE INDEX shared_sv ON agent_memories USING GIN (search_vector)")
        await conn.execute("CREATE INDEX shared_trgm ON agent_memories USING GIN (search_head gin_trgm_ops)")
        await conn.execute("DROP INDEX agent_memories_user_search_vector_idx")
        await conn.execute("DROP INDEX agent_memories_user_search_head_trgm_idx")
        await conn.execute("ANALYZE agent_memories")
    shared = await timed(store)
    await store.close()

    def ms(samples: list[float], p: float) -> float:
        return percentile([s * 1000 for s in samples], p)

    lines = [
        "## Search latency with many users sharing the tables (issue 17) — `benchmarks/search_scale_bench.py`",
        "",
        f"`python benchmarks/search_scale_bench.py --size {args.size} --write` ({machine()}, load "
        f"{os.getloadavg()[0]:.1f}): one user with {args.size:,} memories, 10 other users with {args.size // 10:,} "
        "each; lexical search (no embedder) through `MemoryStore.search`, 15 rounds of 6 queries per kind. "
        "Both index layouts are measured in the same run on the same data.",
        "",
        "| query kind | user-first GIN p50 / p95 (ms) | shared GIN p50 / p95 (ms) | p95 ratio | other users' results |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in QUERIES:
        (a, fa), (b, fb) = user_first[kind], shared[kind]
        lines.append(
            f"| {kind} | {ms(a, 50):.1f} / {ms(a, 95):.1f} | {ms(b, 50):.1f} / {ms(b, 95):.1f} | "
            f"{ms(b, 95) / ms(a, 95):.1f}x | {fa + fb} |"
        )
    publish("search-scale", lines, write=args.write)


async def publish_hybrid(store: MemoryStore, args: argparse.Namespace) -> None:
    load = os.getloadavg()[0]
    measured = await timed(store)
    await store.close()
    lines = [
        "## Hybrid search latency with many users sharing the tables (issue 17) — "
        "`benchmarks/search_scale_bench.py --embedder local`",
        "",
        f"`python benchmarks/search_scale_bench.py --size {args.size} --embedder local --write` ({machine()}, load "
        f"{load:.1f}): one user with {args.size:,} memories, 10 other users with {args.size // 10:,} each, every "
        "memory with its MiniLM vector; hybrid search through `MemoryStore.search`, the query's embedding "
        "included, 15 rounds of 6 queries per kind.",
        "",
        "| query kind | p50 (ms) | p95 (ms) | other users' results |",
        "|---|---:|---:|---:|",
    ]
    for kind, (samples, foreign) in measured.items():
        ms = [x * 1000 for x in samples]
        lines.append(f"| {kind} | {percentile(ms, 50):.1f} | {percentile(ms, 95):.1f} | {foreign} |")
    publish("search-scale-hybrid", lines, write=args.write)


if __name__ == "__main__":
    asyncio.run(main())
