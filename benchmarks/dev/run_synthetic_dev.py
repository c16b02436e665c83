"""Run memory search over the synthetic DEVELOPMENT set (benchmarks/dev/synthetic_dev.json.gz; tuning may use it).

python benchmarks/dev/run_synthetic_dev.py [--no-dense] [--misses]

Stores each user's memories in order into a throwaway database (a fresh one per mode), lexical only (embedder
"none") and, unless --no-dense, again with the local sentence-transformers embedder; then reports R@1 / R@5 / MRR
per category, the AUC of the top score between answerable and unanswerable queries, and results not owned by the
asking user. A hit counts only when its score reaches ``settings.search_min_score``. --misses prints, per missed
answerable query, the gold description and the top three results with scores and ``why``. Never writes RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _common import auc, throwaway_database_url  # noqa: E402

from agent_memory import MemoryStore  # noqa: E402
from agent_memory.config import Settings  # noqa: E402

DATA = HERE / "synthetic_dev.json.gz"
CATEGORIES = ["exact", "paraphrase", "preference", "updated_fact", "buried_error"]


def load() -> dict:
    if not DATA.exists():
        sys.exit(f"{DATA} is missing: run benchmarks/dev/make_synthetic_dev.py first")
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        data = json.load(f)
    assert data["version"] == 1, data["version"]
    return data


async def fill(store: MemoryStore, data: dict) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Store every user's memories in order; (user -> memory id -> key, key -> owning user)."""
    keys: dict[str, dict[str, str]] = {}
    owner: dict[str, str] = {}
    for user, d in data["users"].items():
        keys[user] = {}
        for m in d["memories"]:
            key = await store.store(m["content"], user_id=user, description=m["description"],
                                    memory_type=m["memory_type"])  # fmt: skip
            keys[user][m["id"]] = key
            owner[key] = user
    if store.embeddings is not None:
        await store.embeddings.flush()
    await store.db.pool.execute("ANALYZE agent_memories")
    return keys, owner


async def evaluate(store: MemoryStore, data: dict, label: str, misses: bool) -> list[str]:
    t0 = time.perf_counter()
    keys, owner = await fill(store, data)
    t_store = time.perf_counter() - t0
    cut = store.settings.search_min_score
    per: dict[str, list[tuple[int | None, float]]] = {c: [] for c in CATEGORIES}  # (rank or None, top score)
    top_no: list[float] = []
    rejected = foreign = 0
    miss_lines: list[str] = []
    t0 = time.perf_counter()
    for user, d in data["users"].items():
        desc = {keys[user][m["id"]]: m["description"] for m in d["memories"]}
        for q in d["queries"]:
            items = await store.search(q["query"], user_id=user, limit=10, min_score=0.0)
            foreign += sum(owner.get(i.memory_key) != user for i in items)
            top = (items[0].score or 0.0) if items else 0.0
            kept = [i.memory_key for i in items if (i.score or 0.0) >= cut]
            if q["gold"] is None:
                top_no.append(top)
                rejected += not kept
                continue
            gold = keys[user][q["gold"]]
            rank = kept.index(gold) + 1 if gold in kept else None
            per[q["category"]].append((rank, top))
            if misses and rank != 1:
                miss_lines += [f"[{q['category']}] {user}: {q['query']!r}  (gold rank {rank or '-'})",
                               f"    gold: {desc[gold]!r}"]  # fmt: skip
                for i in items[:3]:
                    mark = "*" if i.memory_key == gold else " "
                    miss_lines.append(f"   {mark}{i.score:.3f} {desc.get(i.memory_key, '?')!r} why={i.why}")
    t_search = time.perf_counter() - t0
    lines = [f"### {label}", "", "| category | n | R@1 | R@5 | MRR |", "|---|---|---|---|---|"]
    every: list[tuple[int | None, float]] = []
    for c in CATEGORIES:
        lines.append(row(c, per[c]))
        every += per[c]
    lines.append(row("**answerable**", every))
    n_no = len(top_no)
    lines += ["", f"- unanswerable: {n_no} queries, {rejected} returned nothing above min_score {cut} "
              f"({rejected / max(n_no, 1):.2f})",
              f"- AUC answerable vs unanswerable (top score): {auc([s for _, s in every], top_no):.3f}",
              f"- results not owned by the asking user: {foreign}",
              f"- store {t_store:.1f}s, search {t_search:.1f}s ({len(every) + n_no} queries)"]  # fmt: skip
    if misses:
        lines += ["", f"#### misses ({label})", "", *miss_lines]
    return lines


def row(name: str, ranks: list[tuple[int | None, float]]) -> str:
    n = len(ranks)
    if not n:
        return f"| {name} | 0 | - | - | - |"
    r1 = sum(r == 1 for r, _ in ranks) / n
    r5 = sum(r is not None and r <= 5 for r, _ in ranks) / n
    mrr = sum(1 / r for r, _ in ranks if r is not None) / n
    return f"| {name} | {n} | {r1:.3f} | {r5:.3f} | {mrr:.3f} |"


async def run(args: argparse.Namespace) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data = load()
    n_mem = sum(len(d["memories"]) for d in data["users"].values())
    n_q = sum(len(d["queries"]) for d in data["users"].values())
    print(f"synthetic dev set: {len(data['users'])} users, {n_mem} memories, {n_q} queries\n")
    modes = [("lexical (embedder none)", None)]
    if not args.no_dense:
        from agent_memory.search import SentenceTransformerEmbedder

        modes.append(("hybrid (sentence-transformers)", SentenceTransformerEmbedder))
    for label, make in modes:
        url = await throwaway_database_url(None)  # a fresh database per mode: nothing stored twice
        settings = Settings(database_url=url, embedder="none")
        store = await MemoryStore.open(url, settings=settings, embedder=make() if make else None)
        try:
            print("\n".join(await evaluate(store, data, label, args.misses)) + "\n", flush=True)
        finally:
            await store.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--no-dense", action="store_true", help="lexical search only")
    p.add_argument("--misses", action="store_true", help="print each missed answerable query with the top three")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
