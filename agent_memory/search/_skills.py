"""Ranking of one user's skills for one agent: full-text + skill-name match + trigram in SQL, dense cosine in Python.

The same fusion as memory search (:mod:`._fusion`): each ranker gives a rank and an evidence in [0, 1], its
contribution is the evidence weighted by reciprocal rank, and the contributions combine as a noisy-OR, so a
relevance means the same for every query. The rankers:

* **full-text** (``search_vector``): every query word as a lexeme; evidence = the share of query words found
  (a row matching the whole ``websearch_to_tsquery`` form counts as complete).
* **name**: all of the skill's own name words in the task ("count words" in "please count the words of x.txt")
  is strong evidence even when the task has many other words.
* **trigram** (``search_head``, short queries only): typos and partial names.
* **dense** (optional embedder): cosine of the query and each skill's name, description and example prompts, so
  paraphrases find a skill. Skills are few per (user, agent), so every one is scored in Python and pgvector is not
  needed; a skill's vector is written the first time it is scored (and again when its text changed).

The caller (the store) resolves the user's row id on a connection and hands both in, so this wing never writes the
user filter, does not import the store, and one search checks out one connection.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

from ._embedders import Embedder, EmbeddingError
from ._fusion import (
    CANDIDATES_PER_RANKER,
    MAX_CONTRIBUTION,
    RRF_K,
    TRIGRAM_MAX_WORDS,
    TRIGRAM_THRESHOLD,
    contribution,
    noisy_or,
)
from ._hybrid import Connection, fetch_with_settings

log = logging.getLogger(__name__)

# The columns every statement on skills returns (the skills wing builds its Skill model from them).
SKILL_COLUMNS = (
    "s.id, s.agent_id, s.name, s.description, s.code, s.language, s.parameters, s.example_prompts, s.tags, "
    "s.status, s.source, s.version, s.execution_count, s.success_count, s.last_error, s.metadata, s.created_at, "
    "s.updated_at, s.last_used_at"
)

# A read-only transaction with the trigram threshold of the search wing, sent as one simple query (one round trip).
_BEGIN_SQL = f"BEGIN;\nSET LOCAL pg_trgm.word_similarity_threshold = {TRIGRAM_THRESHOLD}"

_MINE = "s.user_id = $1 AND s.agent_id = $2 AND s.status = ANY($4::text[])"
# $1 the user's row id (resolved by the store), $2 agent, $3 query, $4 statuses, $5 candidates per ranker,
# $6 all rows, $7 embedder space
_SEARCH_SQL = f"""
WITH q AS (
    SELECT lex,
           CASE WHEN cardinality(lex) = 0 THEN NULL ELSE to_tsquery('simple', array_to_string(ARRAY(
               SELECT quote_literal(x) FROM unnest(lex) x), ' | ')) END AS tsq_or,
           websearch_to_tsquery('english', $3) AS tsq_web
    FROM (SELECT tsvector_to_array(to_tsvector('english', $3)) AS lex) l
),
fts_hits AS (
    SELECT s.id, s.search_vector AS sv, (s.search_vector @@ q.tsq_web) AS all_terms,
           ts_rank(s.search_vector, q.tsq_or) AS rank
    FROM skills s, q
    WHERE {_MINE} AND q.tsq_or IS NOT NULL AND s.search_vector @@ q.tsq_or
    ORDER BY all_terms DESC, rank DESC LIMIT $5
),
fts_cov AS (  -- share of the query's words each kept row has (computed for the kept rows only)
    SELECT h.id, h.all_terms, h.rank,
           (SELECT count(*) FROM unnest(q.lex) x WHERE h.sv @@ to_tsquery('simple', quote_literal(x)))::float8
             / cardinality(q.lex) AS coverage
    FROM fts_hits h, q
),
fts AS (
    SELECT id, row_number() OVER (ORDER BY all_terms DESC, coverage DESC, rank DESC) AS rnk,
           CASE WHEN all_terms THEN 1.0 ELSE coverage END ^ 1.5 * 0.95 AS evidence
    FROM fts_cov
),
name_hits AS (
    SELECT s.id, cardinality(s.name_lexemes) AS total,
           (SELECT count(*) FROM unnest(s.name_lexemes) w WHERE w = ANY(q.lex))::float8
             / greatest(cardinality(s.name_lexemes), 1) AS coverage
    FROM skills s, q
    WHERE {_MINE} AND s.name_lexemes && q.lex
),
nam AS (
    SELECT id, row_number() OVER (ORDER BY coverage DESC, total DESC) AS rnk,
           coverage ^ 2 * CASE WHEN total >= 2 THEN 0.9 ELSE 0.5 END AS evidence
    FROM name_hits
    ORDER BY coverage DESC LIMIT $5
),
trg AS (
    SELECT id, row_number() OVER (ORDER BY sim DESC) AS rnk, sim AS evidence FROM (
        SELECT s.id, word_similarity($3, s.search_head)::float8 AS sim
        FROM skills s WHERE {_MINE} AND $3 <% s.search_head
          -- typo rescue is for short queries; long ones cost the most (a one-time filter skips the scan)
          AND (SELECT cardinality(lex) FROM q) <= {TRIGRAM_MAX_WORDS}
        ORDER BY sim DESC LIMIT $5
    ) t
),
hits AS (
    SELECT id, rnk, evidence FROM fts UNION ALL SELECT id, rnk, evidence FROM nam
    UNION ALL SELECT id, rnk, evidence FROM trg
),
fused AS (
    SELECT id, 1.0 - exp(sum(ln(1.0 - least({MAX_CONTRIBUTION}, evidence * {RRF_K + 1}.0 / ({RRF_K} + rnk)))))
           AS relevance
    FROM hits GROUP BY id
)
SELECT {SKILL_COLUMNS}, coalesce(f.relevance, 0.0)::float8 AS relevance, e.embedding, e.fingerprint AS emb_fp
FROM skills s LEFT JOIN fused f ON f.id = s.id
LEFT JOIN skill_embeddings e ON e.skill_id = s.id AND e.model = $7
WHERE {_MINE} AND (f.id IS NOT NULL OR $6::boolean)  -- $6: every skill of the pair (dense ranking needs them all)
"""

_SAVE_EMBEDDINGS_SQL = """
INSERT INTO skill_embeddings (skill_id, model, fingerprint, embedding) VALUES ($1, $2, $3, $4)
ON CONFLICT (skill_id, model) DO UPDATE
SET fingerprint = EXCLUDED.fingerprint, embedding = EXCLUDED.embedding, created_at = now()
"""


def skill_embedding_text(row: dict[str, Any]) -> str:
    """What a skill's vector encodes: its name as words, its description and its example prompts."""
    examples = "\n".join(row["example_prompts"] or [])
    return f"{row['name'].replace('_', ' ').replace('-', ' ')}: {row['description']}\n{examples}".strip()


def skill_embedding_fingerprint(row: dict[str, Any]) -> str:
    return hashlib.sha256(skill_embedding_text(row).encode("utf-8")).hexdigest()


async def rank_skills(
    conn: Connection,
    query: str,
    *,
    user_pk: str,
    agent_id: str,
    statuses: Sequence[str],
    embedder: Embedder | None = None,
) -> list[dict[str, Any]]:
    """Rows (:data:`SKILL_COLUMNS` + ``relevance``) of the user's skills for ``query``, unordered and unfiltered.

    ``user_pk`` is the user's row id (what ``skills.user_id`` holds), never the login name (which
    matches no row); the store resolves it on ``conn``, the connection every statement here then runs on.
    Without a usable ``embedder`` only lexically matching skills come back; with one, every skill of the pair does
    (the dense ranker scores them all), each with its fused relevance.
    """
    query_vector: list[float] | None = None
    if embedder is not None and embedder.enabled:
        try:
            query_vector = await embedder.embed_query(query)
        except EmbeddingError as exc:  # the model is an improvement: rank lexically without it
            log.warning("skill search: query embedding failed, ranking lexically: %s", exc)
    space = embedder.model_id if embedder is not None and query_vector is not None else ""
    rows = await fetch_with_settings(
        conn, _BEGIN_SQL, _SEARCH_SQL, user_pk, agent_id, query, list(statuses), CANDIDATES_PER_RANKER,
        query_vector is not None, space,
    )  # fmt: skip
    if embedder is not None and query_vector is not None:
        await _fuse_dense(conn, rows, embedder, query_vector)
    return rows


async def _fuse_dense(conn: Connection, rows: list[dict[str, Any]], embedder: Embedder, query: list[float]) -> None:
    """Add dense evidence to each row's lexical relevance (rank-weighted, noisy-OR: the one fusion)."""
    stale = [r for r in rows if r["embedding"] is None or r["emb_fp"] != skill_embedding_fingerprint(r)]
    if stale:
        try:
            vectors = await embedder.embed([skill_embedding_text(r) for r in stale])
        except EmbeddingError as exc:
            log.warning("skill search: embedding skills failed, ranking lexically: %s", exc)
            return
        for row, vector in zip(stale, vectors, strict=True):
            row["embedding"] = vector
        await conn.executemany(
            _SAVE_EMBEDDINGS_SQL,
            [(r["id"], embedder.model_id, skill_embedding_fingerprint(r), r["embedding"]) for r in stale],
        )
    cosines = {id(r): sum(a * b for a, b in zip(query, r["embedding"], strict=False)) for r in rows}
    ranked = sorted(rows, key=lambda r: -cosines[id(r)])
    for rank, row in enumerate(ranked, start=1):
        dense = contribution(rank, embedder.calibrate(cosines[id(row)]))
        row["relevance"] = noisy_or((float(row["relevance"]), dense))
