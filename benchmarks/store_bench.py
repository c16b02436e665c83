"""MemoryStore latency: store / retrieve / search at 1k and 10k memories for one user.

Other users' rows (10k by default) are present, as in a shared deployment. Search is compared with a
naive ``ILIKE '%q%'`` scan over the same rows, in the same process, on the same server.

    python benchmarks/store_bench.py                 # fresh embedded PostgreSQL, writes RESULTS.md
    python benchmarks/store_bench.py --url postgresql://...  --no-write

Deterministic data (seeded); latencies are wall-clock per call from Python (asyncpg round trip included).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import machine, percentile, publish, summary_ms, throwaway_database_url

from agent_memory import MemoryStore
from agent_memory.config import Settings

WORDS = (
    "install build compile deploy docker kubernetes postgres redis nginx timeout connection refused error warning "
    "package dependency resolve version upgrade migrate schema index query latency memory cpu disk network socket "
    "certificate token auth login session cache queue worker retry backoff request response header payload json "
    "yaml config environment variable secret bucket upload download archive checksum signature commit branch merge "
    "rebase pipeline artifact release tag image container volume mount port firewall route proxy gateway cluster "
    "node pod service ingress replica shard partition vacuum analyze explain transaction deadlock lock rollback"
).split()
COMMANDS = ["npm install", "pip install -r requirements.txt", "pytest -q", "docker build .", "kubectl get pods -A",
            "terraform plan", "cargo build --release", "psql -c 'select 1'", "make test", "go test ./..."]  # fmt: skip


# Real outputs share a few very common words and many rare ones: a Zipf-like vocabulary of the base words
# plus synthetic project-specific terms (module names, hosts, table names).
SYLLABLES = "ka lo mi nu pe ra si to vu xe za bo ci du fe gi".split()
VOCAB = [*WORDS, *(a + b + c for a in SYLLABLES for b in SYLLABLES for c in ("", "x", "tor", "db", "svc"))]
ZIPF_WEIGHTS = [1.0 / (rank + 1) for rank in range(len(VOCAB))]


def make_memory(rng: random.Random) -> tuple[str, str, str]:
    """(content, description, memory_type): a log-like output of 20-60 lines."""
    command = rng.choice(COMMANDS)
    topic = rng.sample(VOCAB[len(WORDS) :], 3)  # each output is about a few specific things
    lines = []
    for n in range(rng.randint(20, 60)):
        level = rng.choices(["INFO", "WARN", "ERROR"], weights=[8, 2, 1])[0]
        words = " ".join([*rng.choices(VOCAB, weights=ZIPF_WEIGHTS, k=rng.randint(3, 8)), rng.choice(topic)])
        lines.append(
            f"2026-11-{rng.randint(1, 28):02d}T{n % 24:02d}:00:00 {level} {words} id={rng.getrandbits(48):012x}"
        )
    kind = rng.choice(["command_output", "command_output", "tool_result", "note"])
    return "\n".join(lines) + "\n", f"{command} output", kind


async def fill(store: MemoryStore, user: str, count: int, rng: random.Random, concurrency: int = 8) -> list[str]:
    docs = [make_memory(rng) for _ in range(count)]
    keys: list[str] = []
    sem = asyncio.Semaphore(concurrency)

    async def one(doc: tuple[str, str, str]) -> None:
        async with sem:
            keys.append(await store.store(doc[0], user_id=user, description=doc[1], memory_type=doc[2]))

    done = 0
    for start in range(0, count, 1000):
        await asyncio.gather(*(one(d) for d in docs[start : start + 1000]))
        done = min(count, start + 1000)
        print(f"  {user}: {done}/{count} stored", file=sys.stderr, flush=True)
    return keys


def make_queries(rng: random.Random, n: int) -> list[str]:
    """A mix of what agents ask: a specific term, a term plus a common word, two specific terms."""
    specific = VOCAB[len(WORDS) :]
    queries = []
    for i in range(n):
        if i % 3 == 0:
            queries.append(rng.choice(specific))
        elif i % 3 == 1:
            queries.append(f"{rng.choice(WORDS)} {rng.choice(specific)}")
        else:
            queries.append(" ".join(rng.sample(specific, 2)))
    return queries


ILIKE_SQL = """
SELECT m.memory_key FROM agent_memories m JOIN "User" u ON u.id = m.user_id
WHERE u.identifier = $1 AND m.is_active AND (m.content ILIKE $2 OR m.description ILIKE $2)
ORDER BY m.created_at DESC LIMIT 5
"""


async def timed(coro_factory, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    samples = []
    for i in range(repeat):
        t = time.perf_counter()
        await coro_factory(i)
        samples.append(time.perf_counter() - t)
    return samples


async def measure(store: MemoryStore, user: str, keys: list[str], rng: random.Random, n: int) -> dict[str, list[float]]:
    queries = make_queries(rng, n)
    sample_keys = [rng.choice(keys) for _ in range(n)]
    new_docs = [make_memory(rng) for _ in range(n)]
    pool = store.db.pool

    async def do_store(i: int) -> None:
        await store.store(new_docs[i][0], user_id=user, description=new_docs[i][1], memory_type=new_docs[i][2])

    async def do_retrieve(i: int) -> None:
        await store.retrieve(sample_keys[i], user_id=user)

    async def do_search(i: int) -> None:
        await store.search(queries[i], user_id=user, limit=5)

    async def do_ilike(i: int) -> None:
        await pool.fetch(ILIKE_SQL, user, f"%{queries[i]}%")

    for warm in range(20):  # warm caches and prepared statements
        await do_search(warm % n)
        await do_ilike(warm % n)
    return {
        "store": await timed(do_store, n),
        "retrieve": await timed(do_retrieve, n),
        "search": await timed(do_search, n),
        "ilike": await timed(do_ilike, n),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="PostgreSQL URL (default: a fresh embedded server)")
    parser.add_argument("--sizes", default="1000,10000", help="memories for the measured user")
    parser.add_argument("--others", type=int, default=10_000, help="memories of other users")
    parser.add_argument("--queries", type=int, default=200, help="operations measured per kind")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = parser.parse_args()

    url = await throwaway_database_url(args.url)
    store = await MemoryStore.open(url, settings=Settings(database_url=url))
    rng = random.Random(20261122)
    print("filling other users...", file=sys.stderr)
    for other in range(4):
        await fill(store, f"bench-other-{other}", args.others // 4, rng)
    rows = []
    user = "bench-user"
    keys: list[str] = []
    for size in [int(s) for s in args.sizes.split(",")]:
        keys += await fill(store, user, size - len(keys), rng)
        async with store.db.pool.acquire() as conn:
            await conn.execute("ANALYZE agent_memories")
        print(f"measuring at {size} memories...", file=sys.stderr)
        result = await measure(store, user, keys, rng, args.queries)
        keys_now = len(keys) + args.queries  # measure() stored n more
        ratio = percentile(result["ilike"], 50) / percentile(result["search"], 50)
        rows.append((size, keys_now, result, ratio))
    await store.close()

    out = [
        "## MemoryStore latency (benchmarks/store_bench.py)",
        "",
        f"Machine: {machine()}; PostgreSQL: {'embedded 18' if not args.url else 'given URL'}; "
        f"{args.others} memories of 4 other users present; {args.queries} operations per row; "
        "memories are 20-60 line log outputs (~2-5 KB). Times are ms: p50 / p95 / mean.",
        "",
        "| memories (user) | store | retrieve (full) | search (lexical) | naive ILIKE scan | ILIKE/search p50 |",
        "|---|---|---|---|---|---|",
    ]
    for size, _, result, ratio in rows:
        out.append(
            f"| {size:,} | {summary_ms(result['store'])} | {summary_ms(result['retrieve'])} | "
            f"{summary_ms(result['search'])} | {summary_ms(result['ilike'])} | {ratio:.1f}x |"
        )
    out.append("")
    out.append(
        "The ILIKE scan returns the newest rows containing the literal query string (no ranking, no stemming);"
        " search ranks by full-text and trigram similarity with reciprocal rank fusion, so it does more work per"
        " row yet uses the GIN indexes instead of reading every row's content."
    )
    publish("store_bench", out, write=not args.no_write)


if __name__ == "__main__":
    asyncio.run(main())
