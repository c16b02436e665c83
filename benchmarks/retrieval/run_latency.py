"""Search latency at 10k and 100k memories for one user (other users' rows present), plus store() latency.

Corpus: the realistic templates of dataset.py, regenerated with many seeds (so hosts, hashes, ids differ) and
bulk-inserted into agent_memories (search_vector / search_head are computed by PostgreSQL as for any insert).
Vectors: encoding 120k texts with MiniLM on 2 CPU cores takes ~20 minutes, so the benchmark encodes a pool of
real MiniLM vectors (2,000 texts of the corpus) and gives each row one of them plus small Gaussian noise
(sigma 0.02 per dimension, re-normalised; cosine to its source ~0.93). The HNSW index then holds a realistic,
clustered 384-d distribution; ranking quality is measured separately (run_quality.py) on real vectors.

Timed: ``MemoryStore.search`` end to end (query embedding with MiniLM included for hybrid), lexical-only
(no embedder) and hybrid; the query embedding alone; and ``MemoryStore.store`` with and without the
background embedding writer. Every result is checked to belong to the asking user.

    python benchmarks/retrieval/run_latency.py              # 10k and 100k, writes benchmarks/RESULTS.md
    python benchmarks/retrieval/run_latency.py --sizes 10000 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _common import percentile, throwaway_database_url, write_section
from dataset import USERS, _user_memories, build_dataset

from agent_memory import MemoryStore
from agent_memory.config import Settings
from agent_memory.search import Embedder, SentenceTransformerEmbedder, embedding_text, vector_index_name, vector_literal

BIG_USER = "perf-user"
OTHER_USERS = [f"perf-other-{i}" for i in range(10)]
OTHER_ROWS_EACH = 2_000
POOL = 2_000
NOISE = 0.02
SEARCH_ROUNDS = 4  # each of the ~35 labelled query texts, 4 times, per size and mode


class PrecomputedQueries(Embedder):
    """MiniLM's vectors for the benchmark queries, computed beforehand: isolates the database's share of a search."""

    def __init__(self, inner: Embedder, vectors: dict[str, list[float]]) -> None:
        self.inner, self.vectors = inner, vectors
        self.similarity_floor, self.similarity_ceiling = inner.similarity_floor, inner.similarity_ceiling

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimension(self) -> int | None:
        return self.inner.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def _to_config(self) -> BaseModel:  # pragma: no cover - never serialised
        raise NotImplementedError


def corpus(n: int, seed: int) -> list[tuple[str, str, str]]:
    """``n`` (content, description, memory_type) triples from the dataset templates."""
    rng = random.Random(seed)
    out: list[tuple[str, str, str]] = []
    while len(out) < n:
        mems, _ = _user_memories(random.Random(rng.randint(0, 2**31)), "x", rng.randint(0, 4))
        rng.shuffle(mems)
        out += [(m.content, m.description, m.memory_type) for m in mems[:60]]  # fewer fillers per batch
    return out[:n]


async def bulk_insert(store: MemoryStore, user: str, rows: list[tuple[str, str, str]], start: int) -> None:
    await store.db.pool.execute('INSERT INTO "User" (identifier) VALUES ($1) ON CONFLICT DO NOTHING', user)
    step = 5_000
    for i in range(0, len(rows), step):
        chunk = rows[i : i + step]
        await store.db.pool.execute(
            """
            INSERT INTO agent_memories (user_id, memory_key, memory_type, description, content, token_count,
                                        char_count, content_sha256, created_at)
            SELECT (SELECT id FROM "User" WHERE identifier = $1), k, t, d, c, length(c) / 4, length(c), h,
                   now() - make_interval(secs => o)
            FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[]) AS x(k, t, d, c, h, o)
            """,
            user,
            [f"bench_{start + i + j:08d}" for j in range(len(chunk))],
            [r[2] for r in chunk],
            [r[1] for r in chunk],
            [r[0] for r in chunk],
            [hashlib.sha256(r[0].encode()).hexdigest() for r in chunk],
            [float(len(rows) - (i + j)) for j in range(len(chunk))],  # older first, 1 s apart
        )


async def add_vectors(store: MemoryStore, pool_vectors: list[list[float]], rng: random.Random) -> int:
    """Give every memory without a vector a noisy copy of a pool vector (see the module docstring)."""
    import numpy as np

    model = "all-MiniLM-L6-v2@384"
    base = np.array(pool_vectors, dtype=np.float32)
    ids = await store.db.pool.fetch(
        """SELECT m.id, m.user_id, m.content_sha256 FROM agent_memories m
           WHERE NOT EXISTS (SELECT 1 FROM agent_memory_embeddings e WHERE e.memory_id = m.id AND e.model = $1)""",
        model,
    )
    gen = np.random.default_rng(rng.randint(0, 2**31))
    step = 5_000
    for i in range(0, len(ids), step):
        chunk = ids[i : i + step]
        picks = base[gen.integers(0, len(base), len(chunk))]
        vecs = picks + gen.normal(0, NOISE, picks.shape).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        await store.db.pool.execute(
            """INSERT INTO agent_memory_embeddings (memory_id, user_id, model, dim, content_sha256, embedding)
               SELECT i, u, $4, 384, h, v::vector FROM unnest($1::uuid[], $2::text[], $3::text[], $5::text[])
                      AS x(i, u, h, v)""",
            [r["id"] for r in chunk], [r["user_id"] for r in chunk], [r["content_sha256"] for r in chunk], model,
            [vector_literal(v) for v in vecs.tolist()],
        )  # fmt: skip
    return len(ids)


async def time_searches(store: MemoryStore, queries: list[str], owned: set[str]) -> tuple[list[float], int, int]:
    samples: list[float] = []
    cross = hits = 0
    for q in queries[:5]:  # warm-up (plans, caches, model thread)
        await store.search(q, user_id=BIG_USER)
    for _ in range(SEARCH_ROUNDS):
        for q in queries:
            t = time.perf_counter()
            items = await store.search(q, user_id=BIG_USER, limit=5)
            samples.append(time.perf_counter() - t)
            hits += len(items)
            cross += sum(1 for i in items if i.memory_key not in owned)
    return samples, cross, hits


async def _index_vectors(
    hybrid: MemoryStore,
    minilm: SentenceTransformerEmbedder,
    pool_vectors: list[list[float]],
    rng: random.Random,
    build_notes: list[str],
) -> None:
    # Bulk load, then build the HNSW index once (faster than growing it row by row).
    await hybrid.db.pool.execute(f"DROP INDEX IF EXISTS {vector_index_name(minilm.model_id)}")
    n_vec = await add_vectors(hybrid, pool_vectors, rng)
    async with hybrid.db.pool.acquire() as conn:
        await conn.execute("SET statement_timeout = 0")  # bulk maintenance, not a request
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute("VACUUM ANALYZE agent_memories")
        await conn.execute("VACUUM ANALYZE agent_memory_embeddings")
    async with hybrid.db.pool.acquire() as conn:
        await conn.execute("SET statement_timeout = 0")
        await conn.execute("SET maintenance_work_mem = '1GB'")
        t1 = time.perf_counter()
        await conn.execute(
            f"CREATE INDEX {vector_index_name(minilm.model_id)} ON agent_memory_embeddings USING hnsw "
            "((embedding::vector(384)) vector_cosine_ops) WHERE model = 'all-MiniLM-L6-v2@384'"
        )
        build_notes.append(f"HNSW build over {n_vec} new + earlier vectors {time.perf_counter() - t1:.0f} s")


def fmt(samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return f"{percentile(ms, 50):.1f} | {percentile(ms, 95):.1f}"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    # Loading 100,000+ rows and building indexes runs longer than a request may (the default statement timeout).
    os.environ.setdefault("AGENT_MEMORY_STATEMENT_TIMEOUT_SECONDS", "0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(args.seed)
    url = await throwaway_database_url(args.url)
    settings = Settings(database_url=url, pool_max_size=4)
    minilm = SentenceTransformerEmbedder()
    lexical = await MemoryStore.open(url, settings=settings)
    hybrid = await MemoryStore.open(url, settings=settings, embedder=minilm)
    assert hybrid.embeddings is not None and hybrid.embeddings.available
    await hybrid.embeddings.ensure_ready()

    t0 = time.perf_counter()
    big = corpus(max(sizes), args.seed)
    others = corpus(OTHER_ROWS_EACH * len(OTHER_USERS), args.seed + 1)
    pool_texts = [embedding_text(d, c[:1500], c[-500:], len(c)) for c, d, _ in rng.sample(big, POOL)]
    pool_vectors = await minilm.embed(pool_texts)
    prep_s = time.perf_counter() - t0
    others_present = await lexical.db.pool.fetchval('SELECT count(*) FROM "User" WHERE identifier = $1', OTHER_USERS[0])
    for i, user in enumerate([] if others_present else OTHER_USERS):
        await bulk_insert(lexical, user, others[i * OTHER_ROWS_EACH : (i + 1) * OTHER_ROWS_EACH], 10_000_000 * (i + 1))

    queries = sorted({q.text for q in build_dataset(7).queries if q.user == USERS[0]})
    vectors = dict(zip(queries, await minilm.embed(queries), strict=True))
    precomputed = await MemoryStore.open(url, settings=settings, embedder=PrecomputedQueries(minilm, vectors))
    lines = [
        "### Search latency (one user with N memories; 10 other users with 2,000 each)",
        "",
        f"Reproduce: `python benchmarks/retrieval/run_latency.py` (seed {args.seed}). {len(queries)} query texts of "
        f"all categories x {SEARCH_ROUNDS} rounds per row, limit 5, default cut-off, sequential, through "
        "`MemoryStore.search`; embedded PostgreSQL 18 + pgvector 0.8.6 (HNSW m=16, ef_construction=64, "
        f"ef_search=40, iterative scan) on the same 2-CPU machine as the client. Vectors: real MiniLM pool of "
        f"{POOL} texts + noise (see run_latency.py docstring).",
        "",
        "| memories of the user | ranking | search p50 ms | search p95 ms | results/query | cross-user hits |",
        "|---|---|---|---|---|---|",
    ]
    inserted = 0
    build_notes = []
    have = int(
        await lexical.db.pool.fetchval(
            'SELECT count(*) FROM agent_memories m JOIN "User" u ON u.id = m.user_id WHERE u.identifier = $1', BIG_USER
        )
    )
    for size in sizes:
        t0 = time.perf_counter()
        if have >= size:  # --url of a database this script already loaded: reuse it
            inserted = size
            build_notes.append(f"{size}: reused")
        else:
            await bulk_insert(lexical, BIG_USER, big[max(inserted, have) : size], max(inserted, have))
            inserted = have = size
            await _index_vectors(hybrid, minilm, pool_vectors, rng, build_notes)
            build_notes.append(f"{size}: load + analyze + index {time.perf_counter() - t0:.0f} s")
        owned = {
            r["memory_key"]
            for r in await lexical.db.pool.fetch(
                'SELECT memory_key FROM agent_memories m JOIN "User" u ON u.id = m.user_id WHERE u.identifier = $1',
                BIG_USER,
            )
        }
        modes = (
            ("lexical (no embedder)", lexical),
            ("hybrid, database share (query vectors precomputed)", precomputed),
            ("hybrid (MiniLM query embedding included)", hybrid),
        )
        for name, st in modes:
            samples, cross, hits = await time_searches(st, queries, owned)
            lines.append(f"| {size:,} | {name} | {fmt(samples)} | {hits / len(samples):.1f} | {cross} |")
            print(lines[-1], flush=True)
    # The query embedding alone, and store() with / without the background writer.
    emb_samples = []
    for q in queries * 2:
        t = time.perf_counter()
        await minilm.embed_query(q)
        emb_samples.append(time.perf_counter() - t)
    store_plain, store_bg = [], []
    texts = corpus(400, args.seed + 2)
    for i, (c, d, mt) in enumerate(texts):
        st, bucket = (lexical, store_plain) if i % 2 == 0 else (hybrid, store_bg)
        t = time.perf_counter()
        await st.store(c, user_id=BIG_USER, description=d, memory_type=mt)
        bucket.append(time.perf_counter() - t)
    t = time.perf_counter()
    await hybrid.embeddings.flush()
    drain = time.perf_counter() - t
    lines += [
        "",
        f"Query embedding alone (MiniLM, CPU): p50 | p95 = {fmt(emb_samples)} ms.",
        f"`store()` of a corpus memory at {inserted:,} rows, no embedder: p50 | p95 = {fmt(store_plain)} ms; with "
        f"the MiniLM background writer attached: {fmt(store_bg)} ms (the vectors were written afterwards; "
        f"the queue drained {drain:.1f} s after the last store). Interleaved 200 + 200 calls.",
        f"Setup: corpus + {POOL} pool vectors {prep_s:.0f} s; " + "; ".join(build_notes) + ".",
    ]
    report = "\n".join(lines)
    print(report)
    if not args.no_write:
        write_section("retrieval-latency", report)
    await precomputed.close()
    await hybrid.close()
    await lexical.close()


if __name__ == "__main__":
    asyncio.run(main())
