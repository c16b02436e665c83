"""Ranking of one user's memories, in SQL.

Lexical retrieval fuses two PostgreSQL rankings with reciprocal rank fusion (RRF, k=60):

* full-text search (``search_vector``: description weighted A, content B) with an OR query of the
  query's stemmed words, ranked by ``ts_rank``;
* trigram word similarity (``pg_trgm``) on key + description + the head of the content, which catches
  identifiers, hashes and typos that full-text search splits or misses.

Every candidate query filters by user in SQL (a join on ``"User".identifier``).
"""

from __future__ import annotations

from typing import Any

import asyncpg

RRF_K = 60
CANDIDATES_PER_RANKER = 50

# $1 user identifier, $2 query text, $3 limit, $4 memory_type (NULL = any)
LEXICAL_SEARCH_SQL = f"""
WITH usr AS (
    SELECT id FROM "User" WHERE identifier = $1
),
q AS (
    SELECT CASE WHEN cardinality(lex) = 0 THEN NULL
                ELSE to_tsquery('simple', array_to_string(ARRAY(SELECT quote_literal(x) FROM unnest(lex) x), ' | '))
           END AS tsq
    FROM (SELECT tsvector_to_array(to_tsvector('english', $2)) AS lex) s
),
fts AS (
    SELECT id, row_number() OVER () AS rnk FROM (
        SELECT m.id
        FROM agent_memories m, usr, q
        WHERE m.user_id = usr.id AND m.is_active AND q.tsq IS NOT NULL AND m.search_vector @@ q.tsq
          AND ($4::text IS NULL OR m.memory_type = $4)
        ORDER BY ts_rank(m.search_vector, q.tsq) DESC, m.created_at DESC
        LIMIT {CANDIDATES_PER_RANKER}
    ) ranked
),
trg AS (
    SELECT id, row_number() OVER () AS rnk FROM (
        SELECT m.id
        FROM agent_memories m, usr
        WHERE m.user_id = usr.id AND m.is_active AND $2 <% m.search_head
          AND ($4::text IS NULL OR m.memory_type = $4)
        ORDER BY word_similarity($2, m.search_head) DESC, m.created_at DESC
        LIMIT {CANDIDATES_PER_RANKER}
    ) ranked
),
fused AS (
    SELECT id, sum(1.0 / ({RRF_K} + rnk)) AS score
    FROM (SELECT * FROM fts UNION ALL SELECT * FROM trg) both_rankers
    GROUP BY id
)
SELECT m.memory_key, m.description, m.memory_type, m.token_count, m.char_count, m.created_at,
       m.content_metadata, m.agent_id, m.thread_id, m.access_count, m.last_accessed_at, m.content_sha256,
       f.score::float8 AS score
FROM fused f JOIN agent_memories m ON m.id = f.id
ORDER BY f.score DESC, m.created_at DESC
LIMIT $3
"""


async def lexical_search(
    conn: asyncpg.Connection | asyncpg.Pool, user_id: str, query: str, limit: int, memory_type: str | None
) -> list[dict[str, Any]]:
    """Rows of the best ``limit`` memories of ``user_id`` for ``query`` (best first, with ``score``)."""
    rows = await conn.fetch(LEXICAL_SEARCH_SQL, user_id, query, limit, memory_type)
    return [dict(r) for r in rows]
