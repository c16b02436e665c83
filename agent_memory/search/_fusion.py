"""The one ranking module: how evidence from several rankers becomes one score (memories and skills alike).

Each ranker returns candidates in rank order with an *evidence* in [0, 1] (share of query words found,
trigram similarity, calibrated cosine). Reciprocal-rank fusion (k = 60) weighted by evidence gives each
ranker's contribution ``c = evidence * (k + 1) / (k + rank)`` (1.0 for perfect evidence at rank 1), and the
contributions combine as a noisy-OR, ``score = 1 - prod(1 - c)``: scores live on [0, 1] and mean the same
for every query, so one ``min_score`` cuts noise. The memory search does this in SQL with the same
constants (:mod:`agent_memory.search._hybrid`); rankers run separately are merged here.

After fusion: newer facts beat stale ones on the same subject (:func:`demote_superseded`), and MMR
(:func:`mmr_rerank`) can re-rank for diversity.

Example:
    >>> round(contribution(1, 1.0), 3), round(contribution(60, 1.0), 3)
    (0.999, 0.508)
    >>> round(noisy_or([0.5, 0.5]), 2)
    0.75
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import Any

RRF_K = 60
CANDIDATES_PER_RANKER = 50
TRIGRAM_THRESHOLD = 0.45  # pg_trgm word_similarity above which a short query matches (typos, partial ids)
TRIGRAM_MAX_WORDS = 4  # longer queries are for full-text and dense ranking
MAX_CONTRIBUTION = 0.999  # one ranker alone never makes a certain match
SUPERSEDED_FACTOR = 0.8  # a stale fact scores at most this share of its newer replacement


def noisy_or(contributions: Iterable[float]) -> float:
    """``1 - prod(1 - c)``: the fused score of independent pieces of evidence."""
    keep = 1.0
    for c in contributions:
        keep *= 1.0 - c
    return 1.0 - keep


def contribution(rank: int, evidence: float) -> float:
    """One ranker's share of the score: its evidence, weighted by reciprocal rank (1.0 at rank 1)."""
    return min(MAX_CONTRIBUTION, evidence * (RRF_K + 1) / (RRF_K + rank))


def fuse_rows(*ranked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge rows of separately run rankers (same formula as the SQL: evidence-weighted RRF, noisy-OR)."""
    merged: dict[str, dict[str, Any]] = {}
    for rows in ranked:
        for row in rows:
            seen = merged.get(row["memory_key"])
            if seen is None:
                merged[row["memory_key"]] = dict(row, why=dict(row["why"]))
            else:
                seen["why"].update(row["why"])
    for row in merged.values():
        hits = row["why"].values()
        row["score"] = noisy_or(contribution(int(h["rank"]), float(h["evidence"])) for h in hits)
        row["rrf"] = sum(1.0 / (RRF_K + int(h["rank"])) for h in hits)
    return sorted(merged.values(), key=lambda r: (-r["score"], -r["created_at"].timestamp()))


# --------------------------------------------------------------------------------------------- stale facts

_SUBJECT_TYPES = {"user_preference", "user_fact"}
_GENERIC_WORDS = {
    "a", "an", "the", "of", "for", "to", "on", "in", "my", "our", "your", "is", "are", "and", "or", "with",
    "user", "users", "preference", "preferences", "preferred", "prefers", "prefer", "fact", "facts", "note",
    "updated", "update", "new", "now", "current", "latest", "changed", "change", "old", "default",
}  # fmt: skip
_WORD_RE = re.compile(r"[a-z0-9][a-z0-9_\-./]*")


def _subject_words(description: str) -> frozenset[str]:
    return frozenset(w for w in _WORD_RE.findall(description.lower()) if w not in _GENERIC_WORDS)


def _same_subject(a: dict[str, Any], b: dict[str, Any]) -> bool:
    meta_a, meta_b = a["content_metadata"] or {}, b["content_metadata"] or {}
    subj_a, subj_b = meta_a.get("subject"), meta_b.get("subject")
    if isinstance(subj_a, str) and isinstance(subj_b, str):
        return subj_a.strip().lower() == subj_b.strip().lower()
    if a["memory_type"] != b["memory_type"] or a["memory_type"] not in _SUBJECT_TYPES:
        return False
    wa, wb = _subject_words(a["description"]), _subject_words(b["description"])
    if not wa or not wb:
        return False
    return len(wa & wb) / len(wa | wb) >= 0.5


def _supersedes(newer: dict[str, Any], older: dict[str, Any]) -> bool:
    named = (newer["content_metadata"] or {}).get("supersedes")
    if isinstance(named, str):
        named = [named]
    if isinstance(named, list) and older["memory_key"] in named:
        return True
    return bool(newer["created_at"] > older["created_at"] and _same_subject(newer, older))


def demote_superseded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop each stale fact just below the newer fact that replaces it (rows: best first)."""
    if len(rows) < 2:
        return rows
    changed = False
    for older in rows:
        for newer in rows:
            if newer is not older and _supersedes(newer, older):
                cap = newer["score"] * SUPERSEDED_FACTOR
                if older["score"] > cap:
                    older["score"] = cap
                    changed = True
    if changed:
        rows.sort(key=lambda r: (-r["score"], -r["created_at"].timestamp()))
    return rows


# --------------------------------------------------------------------------------------------- MMR


def _bigrams(text: str) -> frozenset[tuple[str, str]]:
    words = _WORD_RE.findall(text.lower())
    return frozenset(itertools.pairwise(words)) if len(words) > 1 else frozenset((w, "") for w in words)


def mmr_rerank(rows: list[dict[str, Any]], limit: int, lam: float) -> list[dict[str, Any]]:
    """Maximal marginal relevance: ``lam * score - (1 - lam) * max Jaccard(word bigrams) to picked rows``."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError("mmr must be between 0 and 1")
    grams = [_bigrams(f"{r['description']} {r.get('snippet') or ''}") for r in rows]
    picked: list[int] = []
    left = list(range(len(rows)))
    while left and len(picked) < limit:

        def value(i: int) -> float:
            sim = max((_jaccard(grams[i], grams[j]) for j in picked), default=0.0)
            return float(lam * rows[i]["score"] - (1.0 - lam) * sim)

        best = max(left, key=value)
        picked.append(best)
        left.remove(best)
    return [rows[i] for i in picked]


def _jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
