"""Retrieval quality: Recall@1, Recall@5, MRR per query category for lexical / dense / hybrid ranking.

Runs on a throwaway embedded PostgreSQL (or --url), stores the seeded labelled set of dataset.py through the
real MemoryStore (background embedding writer included), then asks every query through the real SQL
ranking with each ranker set. Dense vectors come from the local MiniLM model (``local-embeddings`` extra).

    python benchmarks/retrieval/run_quality.py            # prints tables, writes benchmarks/RESULTS.md
    python benchmarks/retrieval/run_quality.py --no-write

Answerable categories count a query as found at k when a relevant memory is among the first k results
AFTER the minimum-score cut-off (the default one MemoryStore.search uses). ``no-answer`` queries are right
when the result is empty ("rejection"). Every result is checked to belong to the asking user.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _common import throwaway_database_url, write_section
from dataset import CATEGORIES, build_dataset

from agent_memory import MemoryStore
from agent_memory.config import Settings
from agent_memory.search import DEFAULT_MIN_SCORE, SearchOptions, SentenceTransformerEmbedder, hybrid_search
from agent_memory.store import find_user_pk

CONFIGS: dict[str, dict[str, Any]] = {
    "lexical only": {"rankers": ("fts", "trigram")},
    "dense only": {"rankers": ("dense",)},
    "hybrid": {"rankers": ("fts", "trigram", "dense")},
    "hybrid, classic RRF order": {"rankers": ("fts", "trigram", "dense"), "fusion": "rrf"},
}
ANSWERABLE = [c for c in CATEGORIES if c != "no-answer"]


def metrics(ranked: list[list[str]], relevant: list[set[str]]) -> dict[str, float]:
    n = len(ranked)
    r1 = sum(1 for got, rel in zip(ranked, relevant, strict=True) if got[:1] and got[0] in rel) / n
    r5 = sum(1 for got, rel in zip(ranked, relevant, strict=True) if rel & set(got[:5])) / n
    mrr = 0.0
    for got, rel in zip(ranked, relevant, strict=True):
        for i, key in enumerate(got[:10]):
            if key in rel:
                mrr += 1.0 / (i + 1)
                break
    return {"R@1": r1, "R@5": r5, "MRR": mrr / n, "n": n}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", help="PostgreSQL URL (default: a throwaway embedded server)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    url = await throwaway_database_url(args.url)
    ds = build_dataset(args.seed)
    store = await MemoryStore.open(url, settings=Settings(database_url=url), embedder=SentenceTransformerEmbedder())
    assert store.embeddings is not None and store.embeddings.available, "needs pgvector"
    keys: dict[tuple[str, str], str] = {}
    owner: dict[str, str] = {}
    t0 = time.perf_counter()
    for m in ds.memories:
        key = await store.store(
            m.content, user_id=m.user, description=m.description, memory_type=m.memory_type, metadata=m.metadata
        )
        keys[(m.user, m.tag)] = key
        owner[key] = m.user
    store_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    await store.embeddings.flush()
    flush_s = time.perf_counter() - t0
    # Memory keys as identifiers: one query per user naming a key.
    queries = list(ds.queries)
    from dataset import Query

    for user in {q.user for q in ds.queries}:
        queries.append(Query(user, keys[(user, "cert")], "identifier", ["cert"]))

    # Search takes each user's row id; the store resolves login names (the user filter lives there).
    user_pks = {user: await find_user_pk(store.db.pool, user) for user in {q.user for q in queries}}
    results: dict[str, Any] = {}
    cross_user = 0
    raw: dict[str, list[list[tuple[str, float]]]] = {}
    why: list[dict[str, Any]] = []
    for name, cfg in CONFIGS.items():
        opts = SearchOptions(min_score=0.0, **cfg)
        lists: list[list[tuple[str, float]]] = []
        for q in queries:
            pk = user_pks[q.user]
            rows = (
                await hybrid_search(
                    store.db.pool, q.text, user_pk=pk, limit=10, embeddings=store.embeddings, options=opts
                )
                if pk is not None
                else []
            )
            got = [(r["memory_key"], float(r["score"])) for r in rows]
            if name == "hybrid":
                why.append(
                    {
                        "q": q.text,
                        "cat": q.category,
                        "relevant": [keys[(q.user, t)] for t in q.relevant],
                        "rows": [(r["memory_key"], round(float(r["score"]), 3), r["why"]) for r in rows[:5]],
                    }
                )
            cross_user += sum(1 for k, _ in got if owner.get(k) != q.user)
            lists.append(got)
        raw[name] = lists

    def evaluate(name: str, cut: float) -> dict[str, Any]:
        out: dict[str, Any] = {}
        lists = raw[name]
        for cat in CATEGORIES:
            idx = [i for i, q in enumerate(queries) if q.category == cat]
            kept = [[k for k, s in lists[i] if s >= cut] for i in idx]
            if cat == "no-answer":
                out[cat] = {"rejected": sum(1 for k in kept if not k) / len(idx), "n": len(idx)}
            else:
                rel = [{keys[(queries[i].user, t)] for t in queries[i].relevant} for i in idx]
                out[cat] = metrics(kept, rel)
        idx = [i for i, q in enumerate(queries) if q.category != "no-answer"]
        kept = [[k for k, s in lists[i] if s >= cut] for i in idx]
        rel = [{keys[(queries[i].user, t)] for t in queries[i].relevant} for i in idx]
        out["overall (answerable)"] = metrics(kept, rel)
        return out

    for name in CONFIGS:
        results[name] = evaluate(name, DEFAULT_MIN_SCORE)
    sweep = {cut: evaluate("hybrid", cut) for cut in (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4)}
    lex_sweep = {cut: evaluate("lexical only", cut) for cut in (0.0, 0.1, 0.2, 0.3)}
    # Misses of hybrid, for the record.
    misses = []
    for i, q in enumerate(queries):
        if q.category == "no-answer":
            kept = [k for k, s in raw["hybrid"][i] if s >= DEFAULT_MIN_SCORE]
            if kept:
                misses.append(f"no-answer returned {len(kept)}: {q.user}: {q.text!r} top={raw['hybrid'][i][0][1]:.3f}")
            continue
        rel = {keys[(q.user, t)] for t in q.relevant}
        kept = [k for k, s in raw["hybrid"][i] if s >= DEFAULT_MIN_SCORE][:5]
        if not rel & set(kept):
            misses.append(f"{q.category}: {q.user}: {q.text!r}")

    lines = [
        "## Retrieval quality and latency (issue 7: hybrid retrieval)",
        "",
        f"Labelled set: `benchmarks/retrieval/dataset.py`, seed {args.seed}: {len(ds.memories)} memories of "
        f"{len({m.user for m in ds.memories})} users (near-duplicate command outputs across and within users), "
        f"{len(queries)} queries. Dense = local all-MiniLM-L6-v2 (384-d, CPU). Cut-off: min_score "
        f"{DEFAULT_MIN_SCORE} (the default). Reproduce: `python benchmarks/retrieval/run_quality.py`.",
        "",
        "| ranking | category | n | R@1 | R@5 | MRR |",
        "|---|---|---|---|---|---|",
    ]
    for name, res in results.items():
        for cat in [*ANSWERABLE, "overall (answerable)"]:
            m = res[cat]
            lines.append(f"| {name} | {cat} | {m['n']} | {m['R@1']:.2f} | {m['R@5']:.2f} | {m['MRR']:.2f} |")
        na = res["no-answer"]
        lines.append(f"| {name} | no-answer (share returning nothing) | {na['n']} | - | {na['rejected']:.2f} | - |")
    lines += ["", "Cut-off sweep (hybrid): min_score -> answerable R@5 / no-answer rejection:", ""]
    lines.append(
        ", ".join(
            f"{cut}: {r['overall (answerable)']['R@5']:.2f} / {r['no-answer']['rejected']:.2f}"
            for cut, r in sweep.items()
        )
    )
    lines += ["", "Cut-off sweep (lexical only):", ""]
    lines.append(
        ", ".join(
            f"{cut}: {r['overall (answerable)']['R@5']:.2f} / {r['no-answer']['rejected']:.2f}"
            for cut, r in lex_sweep.items()
        )
    )
    lines += [
        "",
        f"Cross-user hits: {cross_user} (every returned key checked against its owner, all configurations).",
        f"Store: {len(ds.memories)} memories in {store_s:.1f} s through MemoryStore.store with the embedder "
        f"attached ({1000 * store_s / len(ds.memories):.2f} ms each; vectors written in the background, "
        f"{flush_s:.1f} s more to drain the queue).",
        "",
        "Hybrid misses at the default cut-off:" if misses else "Hybrid misses at the default cut-off: none.",
        *[f"- {m}" for m in misses],
    ]
    report = "\n".join(lines)
    print(report)
    Path(__file__).with_name("quality.json").write_text(
        json.dumps(
            {
                "results": results,
                "sweep": {str(k): v for k, v in sweep.items()},
                "cross_user": cross_user,
                "misses": misses,
                "hybrid_detail": why,
            },
            indent=2,
        )
    )
    if not args.no_write:
        write_section("retrieval-quality", report)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
