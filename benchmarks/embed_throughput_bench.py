"""Embedding throughput of the local embedder (``SentenceTransformerEmbedder``) as agent-memory runs it.

Texts: 2,000 characters each, cut from the development sets' documents (real man pages and Python source; the
held-out sets are not read). Each configuration embeds the same texts through ``SentenceTransformerEmbedder.embed``
(the background path that stored memories take: passes of 8, a thread off the event loop), in ``--rounds`` rounds
that interleave the configurations, so machine noise hits them alike; reported: texts/s best and median.
Configurations: the earlier default (float32, 256 word pieces), the current default (bfloat16 where the CPU has
it, 112 word pieces) and the one before it (128 word pieces), each with 1 and 2 torch threads (``threads`` is
process-wide; set before each measurement).

    python benchmarks/embed_throughput_bench.py               # prints the table
    python benchmarks/embed_throughput_bench.py --write       # ... and writes it into benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import machine, publish

from agent_memory.search import SentenceTransformerEmbedder

HERE = Path(__file__).resolve().parent
CONFIGS: dict[str, dict[str, Any]] = {
    "float32, 256 word pieces (earlier default)": {"precision": "float32", "max_tokens": None},
    "auto precision, 128 word pieces (earlier default)": {"precision": "auto", "max_tokens": 128},
    "auto precision, 112 word pieces (default)": {"precision": "auto", "max_tokens": 112},
}


def texts(n: int) -> list[str]:
    docs = [
        d for name in ("manpages", "stdlib") for d in json.load(gzip.open(HERE / "dev" / f"{name}.json.gz"))["docs"]
    ]
    stream = "\n".join(f"{d['description']}\n{d['content']}" for d in docs)
    return [stream[i * 2000 : (i + 1) * 2000] for i in range(n)]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=160)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    sample = texts(args.texts)
    embedders = {name: SentenceTransformerEmbedder(**cfg) for name, cfg in CONFIGS.items()}
    for e in embedders.values():
        await e.embed(sample[:8])  # load and warm up
    rates: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for threads in (1, 2):
            for name, e in embedders.items():
                torch.set_num_threads(threads)
                t = time.perf_counter()
                await e.embed(sample)
                rates.setdefault((name, threads), []).append(len(sample) / (time.perf_counter() - t))
    bf16 = next(iter(e for e in embedders.values() if e._config.precision == "auto")).bfloat16
    lines = [
        "## Local embedding throughput (issue 17) — `benchmarks/embed_throughput_bench.py`",
        "",
        f"`python benchmarks/embed_throughput_bench.py{' --write' if args.write else ''}` ({machine()}, "
        f"{time.strftime('%Y-%m-%d')}, load {os.getloadavg()[0]:.1f}; CPU bfloat16: {'yes' if bf16 else 'no'}): "
        f"{args.texts} texts of 2,000 characters through `SentenceTransformerEmbedder.embed`, {args.rounds} "
        "interleaved rounds.",
        "",
        "| configuration | torch threads | texts/s best | texts/s median |",
        "|---|---:|---:|---:|",
    ]
    for (name, threads), r in rates.items():
        lines.append(f"| {name} | {threads} | {max(r):.1f} | {statistics.median(r):.1f} |")
    for e in embedders.values():
        await e.close()
    publish("embed-throughput", lines, write=args.write)


if __name__ == "__main__":
    asyncio.run(main())
