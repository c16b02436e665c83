"""Development loop for the lexical ranking: the DEV real-text sets only (never benchmarks/heldout/).

python benchmarks/dev/tune_lexical.py
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "retrieval"))
from _common import auc, throwaway_database_url

from agent_memory import MemoryStore
from agent_memory.config import Settings

HERE = Path(__file__).resolve().parent
MIN = float(sys.argv[1]) if len(sys.argv) > 1 else None


def metrics(ranked: list[list[str]], gold: list[str]) -> str:
    n = len(gold)
    r1 = sum(1 for r, g in zip(ranked, gold, strict=True) if r[:1] == [g]) / n
    r5 = sum(1 for r, g in zip(ranked, gold, strict=True) if g in r[:5]) / n
    mrr = sum(1 / (r.index(g) + 1) for r, g in zip(ranked, gold, strict=True) if g in r[:10]) / n
    return f"R@1 {r1:.3f}  R@5 {r5:.3f}  MRR {mrr:.3f}  (n={n})"


async def main() -> None:
    from rank_bm25 import BM25Okapi

    url = await throwaway_database_url(None)
    store = await MemoryStore.open(url, settings=Settings(database_url=url, embedder="none"))
    for name in ("manpages", "stdlib"):
        docs = json.load(gzip.open(HERE / f"{name}.json.gz"))["docs"]
        user = f"dev-{name}"
        keys = {}
        for d in docs:
            keys[d["id"]] = await store.store(
                d["content"], user_id=user, description=d["description"], memory_type="note"
            )
        await store.db.pool.execute("ANALYZE agent_memories")
        ours = []
        for d in docs:
            ours.append([i.memory_key for i in await store.search(d["query"], user_id=user, limit=10, min_score=MIN)])
        gold = [keys[d["id"]] for d in docs]
        tok = re.compile(r"\w+")
        corpus = [tok.findall((d["description"] + " " + d["content"]).lower()) for d in docs]
        bm = BM25Okapi(corpus)
        ids = [keys[d["id"]] for d in docs]
        base = []
        for d in docs:
            scores = bm.get_scores(tok.findall(d["query"].lower()))
            base.append([ids[i] for i in sorted(range(len(ids)), key=lambda i: -scores[i])[:10]])
        print(f"{name:9s} agent-memory {metrics(ours, gold)}")
        print(f"{name:9s} BM25         {metrics(base, gold)}")
    await synthetic(store)
    await store.close()


async def synthetic(store: MemoryStore) -> None:
    """The development synthetic set (benchmarks/retrieval/dataset.py), lexical, per category."""
    from dataset import CATEGORIES, build_dataset

    ds = build_dataset(7)
    keys = {}
    for m in ds.memories:
        keys[(m.user, m.tag)] = await store.store(
            m.content, user_id=m.user, description=m.description, memory_type=m.memory_type, metadata=m.metadata
        )
    await store.db.pool.execute("ANALYZE agent_memories")
    cut = store.settings.search_min_score
    top_ans: list[float] = []
    top_no: list[float] = []
    for cat in CATEGORIES:
        qs = [q for q in ds.queries if q.category == cat]
        found5 = rejected = 0
        for q in qs:
            items = await store.search(q.text, user_id=q.user, limit=10, min_score=0.0)
            top = items[0].score if items else 0.0
            kept = [i.memory_key for i in items if (i.score or 0) >= cut]
            if cat == "no-answer":
                top_no.append(top or 0.0)
                rejected += not kept
            else:
                top_ans.append(top or 0.0)
                found5 += bool({keys[(q.user, t)] for t in q.relevant} & set(kept[:5]))
        stat = f"rejected {rejected / len(qs):.2f}" if cat == "no-answer" else f"R@5 {found5 / len(qs):.2f}"
        print(f"synthetic {cat:11s} {stat} (n={len(qs)})")
    print(f"synthetic AUC answerable vs no-answer (top score): {auc(top_ans, top_no):.3f}")


if __name__ == "__main__":
    asyncio.run(main())
