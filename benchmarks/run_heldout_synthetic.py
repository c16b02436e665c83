"""Retrieval quality on the frozen synthetic held-out set, against plain baselines run in the same process.

The set (``benchmarks/heldout/synthetic.json.gz``, written by ``benchmarks/heldout/make_synthetic.py``, checksum
in MANIFEST.sha256, checked by tests/base) holds four users' agent memories -- command outputs, preferences, facts
(some re-stored with a new value), notes -- and questions with one gold memory each, in the categories ``exact``,
``paraphrase``, ``preference``, ``updated_fact``, ``buried_error`` and ``unanswerable`` (gold: nothing). It was
generated and frozen without reading the ranking code or the development sets, and nothing was tuned on it.

Each user's memories are stored in order through ``MemoryStore.store`` (memory type, description, content), so a
newer fact on a subject replaces the older one as the store does it. Systems, all in this run:

* ``agent-memory lexical``: ``MemoryStore.search`` of the default install (no embedder);
* ``agent-memory hybrid``: the same with the local MiniLM embedder (``local-embeddings`` extra);
* ``BM25``, ``dense (MiniLM cosine)``, ``ILIKE``: the plain baselines of ``run_heldout.py``, over the asking user's
  memories. They get *all* of them, including the stale versions of updated facts: a plain baseline does not know
  about versions, so for ``updated_fact`` it may rank an older version first, which counts as a miss.

Reported per system: R@1, R@5, MRR per category and overall (answerable questions only; a hit counts only above the
system's cut-off: agent-memory's default ``settings.search_min_score``, none for the baselines), the AUC with which
the top score separates answerable from unanswerable questions, p50/p95 latency, and results that belonged to
another user (must be 0).

    python benchmarks/run_heldout_synthetic.py              # prints the tables
    python benchmarks/run_heldout_synthetic.py --no-dense   # lexical systems only (no MiniLM)
    python benchmarks/run_heldout_synthetic.py --write      # ... and writes them into benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import auc, machine, percentile, publish, throwaway_database_url
from run_heldout import Ranker, bm25_ranker, dense_ranker, ilike_ranker, store_ranker

from agent_memory import MemoryStore
from agent_memory.config import Settings

SET = Path(__file__).resolve().parent / "heldout" / "synthetic.json.gz"
CATEGORIES = ("exact", "paraphrase", "preference", "updated_fact", "buried_error")


def load() -> dict[str, dict[str, Any]]:
    users: dict[str, dict[str, Any]] = json.load(gzip.open(SET))["users"]
    return users


def evaluate(rank: Ranker, queries: list[dict[str, Any]], keys: dict[str, str], cut: float) -> dict[str, Any]:
    """Per category and overall R@1/R@5/MRR (answerable only), AUC by top score, latency; raw sums to merge users."""
    sums: dict[str, list[float]] = {c: [0.0, 0.0, 0.0, 0.0] for c in (*CATEGORIES, "overall")}  # R@1, R@5, MRR, n
    tops_ans: list[float] = []
    tops_no: list[float] = []
    ms: list[float] = []
    for q in queries:
        t = time.perf_counter()
        got = rank(q["query"])
        elapsed = (time.perf_counter() - t) * 1000
        top = got[0][1] if got else 0.0
        if q["gold"] is None:
            tops_no.append(top)
            continue
        ms.append(elapsed)
        tops_ans.append(top)
        kept = [k for k, s in got if s >= cut]
        gold = keys[q["gold"]]
        hit = (
            kept[:1] == [gold],
            gold in kept[:5],
            next((1 / (i + 1) for i, k in enumerate(kept[:10]) if k == gold), 0.0),
        )
        for c in (q["category"], "overall"):
            for i, v in enumerate((*hit, 1.0)):
                sums[c][i] += float(v)
    return {"sums": sums, "ans": tops_ans, "no": tops_no, "ms": ms}


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    sums = {c: [sum(p["sums"][c][i] for p in parts) for i in range(4)] for c in (*CATEGORIES, "overall")}
    ans = [x for p in parts for x in p["ans"]]
    no = [x for p in parts for x in p["no"]]
    ms = [x for p in parts for x in p["ms"]]
    metrics = {
        c: {"R@1": s[0] / s[3], "R@5": s[1] / s[3], "MRR": s[2] / s[3], "n": s[3]} for c, s in sums.items() if s[3]
    }
    return {"cats": metrics, "AUC": auc(ans, no), "p50": percentile(ms, 50), "p95": percentile(ms, 95),
            "unanswerable": len(no)}  # fmt: skip


async def fill(store: MemoryStore, users: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    keys: dict[str, dict[str, str]] = {}
    for user, data in users.items():
        keys[user] = {}
        for m in data["memories"]:
            keys[user][m["id"]] = await store.store(m["content"], user_id=user, description=m["description"],
                                                    memory_type=m["memory_type"])  # fmt: skip
    await store.db.pool.execute("ANALYZE agent_memories")
    return keys


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url")
    ap.add_argument("--no-dense", action="store_true", help="skip MiniLM (hybrid and dense baseline)")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    users = load()
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
        print(f"storing the synthetic set for {system} ...", file=sys.stderr)
        keys[system] = await fill(store, users)
        if store.embeddings is not None:
            await store.embeddings.flush()
    parts: dict[str, list[dict[str, Any]]] = {}
    foreign_hits: dict[str, list[int]] = {}
    for user, data in users.items():
        docs = [{"id": m["id"], "description": m["description"], "content": m["content"]} for m in data["memories"]]
        base_keys = keys["agent-memory lexical"][user]
        rankers: dict[str, tuple[Ranker, dict[str, str], float]] = {}
        for system, store in stores.items():
            hits = foreign_hits.setdefault(system, [0])
            owned = set(keys[system][user].values())
            rankers[system] = (
                store_ranker(store, user, owned, hits),
                keys[system][user],
                store.settings.search_min_score,
            )
        rankers["BM25"] = (bm25_ranker(docs, base_keys), base_keys, float("-inf"))
        if model is not None:
            rankers["dense (MiniLM cosine)"] = (dense_ranker(docs, base_keys, model), base_keys, float("-inf"))
        rankers["ILIKE (words found)"] = (ilike_ranker(docs, base_keys), base_keys, float("-inf"))
        for system, (rank, system_keys, cut) in rankers.items():
            print(f"{user}: {system} ...", file=sys.stderr)
            result = await asyncio.to_thread(evaluate, rank, data["queries"], system_keys, cut)
            parts.setdefault(system, []).append(result)
    for store in stores.values():
        await store.close()
    results = {system: merge(p) for system, p in parts.items()}
    commit = subprocess.run(  # noqa: ASYNC221 (once, after the measurements)
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    first = next(iter(results.values()))
    counts = ", ".join(f"{c} {int(m['n'])}" for c, m in first["cats"].items() if c != "overall")
    n_mem = sum(len(d["memories"]) for d in users.values())
    lines = [
        "## Held-out synthetic evaluation (issue 17) — `benchmarks/run_heldout_synthetic.py`",
        "",
        f"`python benchmarks/run_heldout_synthetic.py{' --write' if args.write else ''}`, commit {commit}, "
        f"{time.strftime('%Y-%m-%d')}, {machine()}, load {os.getloadavg()[0]:.1f}. Frozen synthetic set "
        f"(`benchmarks/heldout/synthetic.json.gz`; see the script's docstring): {len(users)} users, {n_mem} memories, "
        f"{int(first['cats']['overall']['n'])} answerable questions ({counts}) and {first['unanswerable']} "
        "unanswerable ones. Every system runs in this process. R@k/MRR over answerable questions, after "
        "agent-memory's default cut-off (none for the baselines, which also see stale versions of updated facts); "
        "AUC: answerable vs unanswerable by top score; latency per question in ms (the baselines rank in memory, "
        "agent-memory through PostgreSQL).",
        "",
        "**Overall**",
        "",
        "| system | R@1 | R@5 | MRR | AUC | p50 ms | p95 ms | other users' results |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for system, res in results.items():
        m = res["cats"]["overall"]
        other = str(foreign_hits[system][0]) if system in foreign_hits else "n/a"
        lines.append(f"| {system} | {m['R@1']:.3f} | {m['R@5']:.3f} | {m['MRR']:.3f} | {res['AUC']:.3f} | "
                     f"{res['p50']:.1f} | {res['p95']:.1f} | {other} |")  # fmt: skip
    lines += ["", "**Per category** (R@1 / R@5 / MRR)", "", "| system | " + " | ".join(CATEGORIES) + " |",
              "|---|" + "---:|" * len(CATEGORIES)]  # fmt: skip
    for system, res in results.items():
        cells = [f"{res['cats'][c]['R@1']:.2f} / {res['cats'][c]['R@5']:.2f} / {res['cats'][c]['MRR']:.2f}"
                 if c in res["cats"] else "–" for c in CATEGORIES]  # fmt: skip
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    lines.append("")
    total_foreign = sum(h[0] for h in foreign_hits.values())
    lines.append(f"Results that belonged to another user: {total_foreign}.")
    publish("heldout-synthetic", lines, write=args.write)


if __name__ == "__main__":
    asyncio.run(main())
