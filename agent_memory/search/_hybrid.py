"""Ranking of one user's memories: full-text + trigram + dense cosine, fused in SQL.

Three rankers run in ONE SQL statement, each restricted to the user's rows in SQL:

* **full-text** (``search_vector``: description weighted A, content B): every query word is a lexeme
  (OR query, so natural-language questions match) plus the ``websearch_to_tsquery`` form of the query
  (quotes and ``-word`` work, and rows matching all of it rank first); identifier-like words (with digits)
  also match as prefixes, so ``9f3e2a1`` finds the full commit hash. Evidence = the share of the query's weight
  found, each word weighing its BM25 inverse document frequency over the user's memories (rare words count
  more; a word the user never wrote weighs most, so queries about other users' things score low). Long contents
  are also searched chunk by chunk (80 lines, schema table ``agent_memory_chunks``): the whole content counts,
  and the hit names the lines that matched (``lines``).
* **trigram** (``pg_trgm`` ``word_similarity`` on key + description + head of content, threshold 0.45): catches
  identifiers, hashes, paths and typos (``dsk ful`` -> ``disk full``). Evidence = the similarity. It is the
  costly ranker on large stores, so it runs only for short queries (up to 4 words) and only when full-text
  search found nothing (evidence under 0.05).
* **dense** (pgvector cosine on the configured embedder's vector space, HNSW index): catches paraphrases.
  Evidence = the cosine mapped onto [0, 1] by the embedder's calibration (floor -> 0, ceiling -> 1).
* **profile** (with dense): the user's preferences and facts (``user_preference``, ``user_fact``) closest to
  the query, the best three, read exactly. A request shares few words with the preference that governs it
  ("add the requests library" -> "dependency pinning: exact pins in a lockfile"), and among all memories such a
  preference is rarely in the top dense hits; among the user's preferences and facts it often is. Evidence =
  half the cosine on a wider calibration (from half a span below the floor): a close one counts, a far one
  little, and an exact full-text match still comes first.

Fusion is reciprocal-rank fusion (k = 60) weighted by evidence: ranker *i* contributes
``c_i = evidence_i * (k + 1) / (k + rank_i)`` (1.0 for perfect evidence at rank 1), and the contributions
combine as a noisy-OR, ``score = 1 - prod(1 - c_i)``. Scores live on [0, 1] and mean the same for every query,
so ``min_score`` cuts noise: an unrelated query returns few hits or none (with an embedder, the profile lane's
weak hits may pass it). ``fusion="rrf"`` orders by classic RRF
(``sum 1/(k + rank_i)``) instead, still cut on the same evidence score.

After fusion (in Python, on a few dozen candidates): newer facts beat stale ones on the same subject
(``metadata.subject`` equal, ``metadata.supersedes`` naming the older key, or two ``user_preference`` /
``user_fact`` memories whose descriptions name the same thing): the older one drops below the newer. Optional
MMR (``mmr=0.7``) re-ranks for diversity with word-bigram Jaccard similarity.

Example:
    >>> import asyncio
    >>> from agent_memory import MemoryStore
    >>> async def main() -> list[str]:
    ...     async with await MemoryStore.open() as store:
    ...         await store.store("write failed: disk full on /dev/sda1 (100% used)", user_id="alice",
    ...                           description="backup job on build-01", memory_type="command_output")
    ...         return [i.description for i in await store.search("dsk ful", user_id="alice")]  # a typo
    >>> asyncio.run(main())  # doctest: +SKIP
    ['backup job on build-01']
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from ._fusion import (
    CANDIDATES_PER_RANKER,
    MAX_CONTRIBUTION,
    RRF_K,
    TRIGRAM_MAX_WORDS,
    TRIGRAM_THRESHOLD,
    demote_superseded,
    fuse_rows,
    mmr_rerank,
)
from ._worker import EmbeddingService, sql_literal, vector_literal

DF_CAP = 1000  # document frequencies are counted up to this; a word that common is not used to find candidates
N_CAP = 50_000  # ... and the user's memories up to this
# Lexical ranking reads a query's first words and at most this many distinct words of them: each word costs scans
# of the user's memories and chunks, and a pasted 600-word log line took ~5 s (the dense ranker reads it all).
MAX_QUERY_WORDS = 32
MAX_QUERY_LEXEMES = 64
HNSW_EF_SEARCH = 40  # pgvector default; iterative scan still fills the candidate list
DEFAULT_MIN_SCORE = 0.15
# The profile lane: the user's preferences and facts closest to the query join the candidates even when
# neither full-text nor the top dense hits reach them ("deploy this to prod" -> the deploy preference).
PROFILE_TYPES = ("user_preference", "user_fact")
PROFILE_LANE = 3  # how many of them
PROFILE_SCAN = 500  # ... out of the user's newest this many (2,000 cost 35 ms p95 at 100k memories)
# A lane hit's evidence is half its cosine on the wider calibration: at most 0.5, so a lane hit alone stays below
# an exact full-text match. Below a cosine of ~0.36 (local MiniLM) it still weighs more than a dense hit of that
# cosine: that is how a request reaches a preference it shares nothing with. A preference that dense search
# also found counts twice, on purpose: among the user's standing preferences, it is the one that applies.
PROFILE_WEIGHT = 0.5

Ranker = Literal["fts", "trigram", "dense"]  # "dense" includes the profile lane
Connection = asyncpg.Connection | PoolConnectionProxy
ALL_RANKERS: tuple[Ranker, ...] = ("fts", "trigram", "dense")

# The columns agent_memory.store.item_from_row reads; every query that returns MemoryItems selects these.
MEMORY_ITEM_COLUMNS = (
    "m.memory_key, m.description, m.memory_type, m.token_count, m.char_count, m.created_at, "
    "m.content_metadata, m.agent_id, m.thread_id, m.access_count, m.last_accessed_at, m.content_sha256, "
    "m.version, m.status, m.status_reason, m.subject, m.valid_from, m.valid_until, m.expires_at, m.updated_at"
)
# Not past its expiry: a memory whose expires_at has passed is gone for every read until it is purged.
NOT_EXPIRED = "(m.expires_at IS NULL OR m.expires_at > now())"

# $1 the user's id (resolved by the store before the search, and bound as a value so the planner sees it: a
# user with 200 memories is scanned through the user index, one with 100,000 through the text/vector indexes),
# $2 query text, $3 candidates per ranker, $4 memory_type (NULL = any), $5 excluded words, $6 query for
# websearch_to_tsquery.
# Every statement (lexical or dense) takes these same six parameters, but the dense one does not use $6 and
# PostgreSQL refuses a parameter whose type it cannot infer: the never-read ``params`` CTE declares their types.
_PARAMS = r"""params AS (SELECT $2::text AS query, $6::text AS websearch_query),
keyhit AS (
    -- a memory key named in the query (e.g. from a [MemoryRef: ...] placeholder) is an exact hit
    SELECT m.id, 1 AS rnk, 1.0::float8 AS evidence
    FROM agent_memories m
    WHERE m.user_id = $1 AND m.is_active AND m.memory_key = ANY(regexp_split_to_array(trim($2), '[\s,;]+'))
      AND ($4::text IS NULL OR m.memory_type = $4)
),
neg AS (
    -- words the query excludes with websearch syntax (-word): no ranker may return a row containing them
    SELECT CASE WHEN $5::text = '' OR numnode(plainto_tsquery('english', agent_memory_words($5))) = 0 THEN NULL
                ELSE to_tsquery('simple', array_to_string(ARRAY(
                    SELECT quote_literal(x)
                    FROM unnest(tsvector_to_array(to_tsvector('english', agent_memory_words($5)))) x), ' | '))
           END AS tsq
)"""

_FTS = f"""
q0 AS (
    -- one row per query word: its tsquery (words with digits also match as prefixes), in how many of this
    -- user's memories it occurs (counted up to a cap), and whether the user has it at all (also deep in a long
    -- output, where only the chunks hold it). Never table-wide statistics: other users' rows skew them, and a
    -- partitioned table has none until its parent is analyzed.
    SELECT lq, d.df, d.df > 0 OR EXISTS (SELECT 1 FROM agent_memory_chunks c
                                         WHERE c.user_id = $1 AND c.search_vector @@ lq) AS present
    FROM (SELECT x AS l FROM unnest(tsvector_to_array(to_tsvector('english', agent_memory_words($2)))) x
          LIMIT {MAX_QUERY_LEXEMES}) w
    CROSS JOIN LATERAL (SELECT to_tsquery('simple', quote_literal(l)
                        || CASE WHEN l ~ '[0-9]' AND length(l) >= 5 THEN ':*' ELSE '' END) AS lq) t
    CROSS JOIN LATERAL (SELECT count(*) AS df FROM (SELECT 1 FROM agent_memories m
                                                    WHERE m.user_id = $1 AND m.is_active AND m.search_vector @@ lq
                                                    LIMIT {DF_CAP}) x) d
),
n_docs AS (
    SELECT count(*) AS n FROM (SELECT 1 FROM agent_memories m WHERE m.user_id = $1 AND m.is_active LIMIT {N_CAP}) u
),
q AS (
    SELECT ARRAY(SELECT lq FROM q0) AS lexq,
           -- BM25's inverse document frequency of each word over the user's memories
           ARRAY(SELECT ln(1.0 + (n.n - q0.df + 0.5) / (q0.df + 0.5)) FROM q0, n_docs n) AS idfs,
           (SELECT string_agg(lq::text, ' | ')::tsquery FROM q0) AS tsq_or,
           -- Rows are matched on the query's rarer words the user has: a word in over {DF_CAP} of the user's
           -- memories ("use") would make PostgreSQL rank all of them. When every word the user has is that
           -- common, all of those must match; when the user has none, nothing matches (typos go to trigram).
           coalesce(
               (SELECT string_agg(lq::text, ' | ')::tsquery FROM q0 WHERE present AND df < {DF_CAP}),
               (SELECT string_agg(lq::text, ' & ')::tsquery FROM q0 WHERE present),
               (SELECT string_agg(lq::text, ' | ')::tsquery FROM q0)
           ) AS tsq_match,
           (SELECT string_agg(lq::text, ' | ')::tsquery FROM q0 WHERE present) AS tsq_any,
           websearch_to_tsquery('english', agent_memory_words($6)) AS tsq_web
),
mem_hits AS (
    SELECT m.id, NULL::tsvector AS chunk_vector, NULL::text AS lines
    FROM agent_memories m, q
    WHERE m.user_id = $1 AND m.is_active AND q.tsq_or IS NOT NULL AND m.search_vector @@ q.tsq_match
      AND ($4::text IS NULL OR m.memory_type = $4)
    ORDER BY (m.search_vector @@ q.tsq_web) DESC, ts_rank(m.search_vector, q.tsq_or) DESC, m.created_at DESC
    LIMIT $3
),
mem_hits_any AS (
    -- the user's common words that never occur together: rows with any of them (only when nothing matched all)
    SELECT m.id, NULL::tsvector AS chunk_vector, NULL::text AS lines
    FROM agent_memories m, q
    WHERE NOT EXISTS (SELECT 1 FROM mem_hits) AND q.tsq_any IS NOT NULL AND q.tsq_any <> q.tsq_match
      AND m.user_id = $1 AND m.is_active AND m.search_vector @@ q.tsq_any AND ($4::text IS NULL OR m.memory_type = $4)
    ORDER BY ts_rank(m.search_vector, q.tsq_or) DESC, m.created_at DESC
    LIMIT $3
),
chunk_hits AS (
    -- long contents are also searched chunk by chunk (80 lines each): the whole content counts, and the hit
    -- says which lines matched
    SELECT c.memory_id AS id, c.search_vector AS chunk_vector, c.line_start || '-' || c.line_end AS lines
    FROM agent_memory_chunks c JOIN agent_memories m ON m.id = c.memory_id AND m.user_id = c.user_id, q
    WHERE c.user_id = $1 AND m.is_active AND q.tsq_or IS NOT NULL AND c.search_vector @@ q.tsq_match
      AND ($4::text IS NULL OR m.memory_type = $4)
    ORDER BY (c.search_vector @@ q.tsq_web) DESC, ts_rank(c.search_vector, q.tsq_or) DESC, c.chunk_no DESC
    LIMIT $3
),
fts_hits AS (
    -- per memory, its best document: the memory's own vector (description + head), or that plus one chunk
    SELECT DISTINCT ON (d.id) d.id, d.lines, d.search_vector, (d.search_vector @@ q.tsq_web) AS all_terms,
           ts_rank(d.search_vector, q.tsq_or, 1) AS rank
    FROM (
        SELECT h.id, h.lines, CASE WHEN h.chunk_vector IS NULL THEN m.search_vector
                                   ELSE m.search_vector || h.chunk_vector END AS search_vector
        FROM (SELECT * FROM mem_hits UNION ALL SELECT * FROM mem_hits_any UNION ALL SELECT * FROM chunk_hits) h
        JOIN agent_memories m ON m.id = h.id AND m.user_id = $1
    ) d, q
    ORDER BY d.id, (d.search_vector @@ q.tsq_web) DESC,
             (SELECT sum(w) FROM unnest(q.lexq, q.idfs) x(lq, w) WHERE d.search_vector @@ x.lq) DESC NULLS LAST,
             ts_rank(d.search_vector, q.tsq_or, 1) DESC, d.lines NULLS FIRST
),
fts AS (
    SELECT id, lines, row_number() OVER (ORDER BY all_terms DESC, coverage DESC, rank DESC) AS rnk,
           -- share of query words found; a row matching the whole websearch query counts as complete
           CASE WHEN all_terms THEN 1.0 ELSE coverage END * 0.95 AS evidence
    FROM (
        -- coverage only for the few rows kept, with each word's tsquery parsed once per query
        SELECT h.id, h.lines, h.all_terms, h.rank,
               -- the share of the query's weight found: each word weighs its IDF (BM25's "rare words count more")
               coalesce((SELECT sum(w) FROM unnest(q.lexq, q.idfs) x(lq, w) WHERE h.search_vector @@ x.lq), 0.0)
               / greatest((SELECT sum(w) FROM unnest(q.idfs) w), 1e-9) AS coverage
        FROM fts_hits h, q
    ) c
)"""

_TRIGRAM = """
trg AS (
    SELECT id, row_number() OVER (ORDER BY sim DESC, created_at DESC) AS rnk, sim AS evidence FROM (
        SELECT m.id, m.created_at, word_similarity($2, m.search_head)::float8 AS sim
        FROM agent_memories m
        WHERE m.user_id = $1 AND m.is_active AND $2 <% m.search_head
          AND ($4::text IS NULL OR m.memory_type = $4) {guard}
        ORDER BY word_similarity($2, m.search_head) DESC, m.created_at DESC
        LIMIT $3
    ) t
)"""

# Trigram matching is the expensive ranker (every candidate's head is re-checked); it exists for typos and
# partial identifiers, so it runs only for short queries (wants_trigram) and is skipped when full-text search
# already found a convincing match (an uncorrelated condition: PostgreSQL evaluates it once and then does not
# scan at all). Typos and partial identifiers leave full-text search without one, so trigram matching then runs.
# On the development sets, running it for long queries too cost 2-3x the latency for +0.01 R@5. "Convincing" is
# any full-text match at all (evidence 0.05): with a weaker guard a query with one word the user never wrote
# ("connection refused postgres") ran it over 100,000 rows for 140 ms and found nothing more.
_TRIGRAM_GUARD = "AND NOT EXISTS (SELECT 1 FROM fts WHERE fts.evidence >= 0.05)"

# $7 query vector (text), $8 similarity floor, $9 similarity ceiling; {dim} and {model} are inlined so the
# planner can use the partial HNSW index of that vector space.
_DENSE = """
dense_raw AS (
    SELECT e.memory_id AS id, (e.embedding::vector({dim}) <=> $7::vector({dim}))::float8 AS dist
    FROM agent_memory_embeddings e
    WHERE e.user_id = $1 AND e.model = {model}
    ORDER BY e.embedding::vector({dim}) <=> $7::vector({dim})
    LIMIT CASE WHEN $4::text IS NULL THEN $3 ELSE $3 * 4 END
),
dense AS (
    SELECT d.id, row_number() OVER (ORDER BY d.dist) AS rnk,
           greatest(0.0, least(1.0, ((1.0 - d.dist) - $8) / greatest($9 - $8, 1e-6))) AS evidence,
           1.0 - d.dist AS cosine
    FROM dense_raw d JOIN agent_memories m ON m.id = d.id AND m.user_id = $1
    WHERE m.is_active AND ($4::text IS NULL OR m.memory_type = $4)
),
profile_rows AS MATERIALIZED (
    -- the user's standing preferences and facts (newest first, capped): read exactly, not through HNSW
    SELECT m.id FROM agent_memories m
    WHERE m.user_id = $1 AND m.is_active AND m.memory_type IN ({profile_types})
      AND ($4::text IS NULL OR m.memory_type = $4) AND {not_expired}
    ORDER BY m.created_at DESC
    LIMIT {profile_scan}
),
profile_dist AS MATERIALIZED (
    -- their distances, each vector read by its key: ordered by distance here, the planner walked the HNSW index
    -- over every user's vectors instead, filtering thousands of them against these rows (~190 ms at 20,000)
    SELECT r.id, (e.embedding::vector({dim}) <=> $7::vector({dim}))::float8 AS dist
    FROM profile_rows r JOIN agent_memory_embeddings e ON e.memory_id = r.id AND e.model = {model}
    WHERE e.user_id = $1
),
profile AS (
    -- the closest of them, calibrated from half a span below the floor and weighed half: "write a query that
    -- counts rows per day" is far from "sql style: uppercase keywords" in any vector space, yet it applies
    SELECT p.id, row_number() OVER (ORDER BY p.dist) AS rnk,
           {profile_weight} * greatest(0.0, least(1.0, ((1.0 - p.dist) - ($8 - ($9 - $8) / 2))
                                    / greatest(($9 + ($9 - $8) / 10) - ($8 - ($9 - $8) / 2), 1e-6))) AS evidence
    FROM (SELECT id, dist FROM profile_dist ORDER BY dist LIMIT {profile_lane}) p
)"""


def _build_sql(rankers: Iterable[Ranker], dense_space: tuple[str, int] | None) -> str:
    ctes = [_PARAMS]
    parts: list[str] = ["SELECT id, rnk, evidence, 'key' AS src, NULL::text AS lines FROM keyhit"]
    if "fts" in rankers:
        ctes.append(_FTS)
        parts.append("SELECT id, rnk, evidence, 'fts' AS src, lines FROM fts")
    if "trigram" in rankers:
        guard = _TRIGRAM_GUARD if "fts" in rankers else ""
        ctes.append(_TRIGRAM.format(guard=guard))
        parts.append("SELECT id, rnk, evidence, 'trigram' AS src, NULL::text AS lines FROM trg")
    if "dense" in rankers and dense_space is not None:
        model, dim = dense_space
        ctes.append(
            _DENSE.format(
                dim=int(dim), model=sql_literal(model), profile_types=", ".join(map(sql_literal, PROFILE_TYPES)),
                not_expired=NOT_EXPIRED, profile_scan=PROFILE_SCAN, profile_lane=PROFILE_LANE,
                profile_weight=PROFILE_WEIGHT,
            )
        )  # fmt: skip
        parts.append("SELECT id, rnk, evidence, 'dense' AS src, NULL::text AS lines FROM dense")
        parts.append("SELECT id, rnk, evidence, 'profile' AS src, NULL::text AS lines FROM profile")
    if len(parts) == 1:
        raise ValueError("no ranker to run")
    k = RRF_K
    return f"""
WITH {",".join(ctes)},
hits AS ({" UNION ALL ".join(parts)}),
fused AS (
    SELECT id,
           1.0 - exp(sum(ln(1.0 - least({MAX_CONTRIBUTION}, evidence * {k + 1}.0 / ({k} + rnk))))) AS score,
           sum(1.0 / ({k} + rnk)) AS rrf,
           jsonb_object_agg(src, jsonb_strip_nulls(jsonb_build_object('rank', rnk, 'evidence', evidence,
                                                                      'lines', lines))) AS why,
           max(lines) AS lines
    FROM hits GROUP BY id
)
SELECT {MEMORY_ITEM_COLUMNS}, left(m.content, 300) AS snippet,
       f.score::float8 AS score, f.rrf::float8 AS rrf, f.why, f.lines
FROM fused f JOIN agent_memories m ON m.id = f.id AND m.user_id = $1, neg
WHERE m.is_active AND (neg.tsq IS NULL OR NOT (m.search_vector @@ neg.tsq)) AND {NOT_EXPIRED}
ORDER BY f.score DESC, m.created_at DESC
"""


# Transaction-local settings: plans made for this user's actual row count (not a generic plan); a lower trigram
# threshold catches typos; HNSW keeps scanning past other users' rows (iterative scan) so filtering by user does
# not starve the result. Sent together with BEGIN as one simple query: one round trip, not two.
_BEGIN_SQL = f"""BEGIN;
SET LOCAL plan_cache_mode = force_custom_plan;
SET LOCAL pg_trgm.word_similarity_threshold = {TRIGRAM_THRESHOLD};
SET LOCAL hnsw.ef_search = {HNSW_EF_SEARCH};
SET LOCAL hnsw.iterative_scan = relaxed_order"""

_SQL_CACHE: dict[tuple[tuple[Ranker, ...], tuple[str, int] | None], str] = {}


def search_sql(rankers: Iterable[Ranker], dense_space: tuple[str, int] | None) -> str:
    """The fused ranking statement for these rankers (and vector space), cached."""
    key = (tuple(r for r in ALL_RANKERS if r in set(rankers)), dense_space)
    if key not in _SQL_CACHE:
        _SQL_CACHE[key] = _build_sql(key[0], dense_space)
    return _SQL_CACHE[key]


@dataclass
class SearchOptions:
    """Knobs of :func:`hybrid_search` (defaults are what ``MemoryStore.search`` uses)."""

    min_score: float = DEFAULT_MIN_SCORE
    mmr: float | None = None  # MMR lambda in [0, 1]: 1 = pure relevance; None = off
    fusion: Literal["weighted", "rrf"] = "weighted"
    rankers: tuple[Ranker, ...] = ALL_RANKERS
    supersede: bool = True
    candidates: int = CANDIDATES_PER_RANKER
    extra: dict[str, Any] = field(default_factory=dict)


async def hybrid_search(
    pool: asyncpg.Pool,
    query: str,
    *,
    user_pk: str,
    limit: int,
    memory_type: str | None = None,
    embeddings: EmbeddingService | None = None,
    options: SearchOptions | None = None,
    connection: Connection | None = None,
) -> list[dict[str, Any]]:
    """Rows of the best ``limit`` memories of one user for ``query``, best first, each with ``score``.

    ``user_pk`` is the user's row id (what ``agent_memories.user_id`` holds), never the login name
    (which matches no row): the store resolves the login name, so the user filter is written in one place. It is
    keyword-only so that an identifier cannot be passed in its place by position.

    ``connection``, when given, runs the lexical ranking (the caller's connection that just resolved the user: no
    second pool checkout and reset); the dense ranking always takes its own connection from ``pool``, so both run
    at once. When the search is cancelled it returns only after the queries it started have stopped, so the
    caller's connection goes back to its pool idle.

    Dense ranking joins in when ``embeddings`` is given, pgvector exists and the query could be embedded;
    otherwise (and always on a server without pgvector) ranking is lexical.
    """
    opts = options or SearchOptions()
    wanted = [r for r in ALL_RANKERS if r in opts.rankers]
    lexical = [r for r in wanted if r != "dense"]
    words = " ".join(query.split()[:MAX_QUERY_WORDS])  # what the lexical rankers read
    base_args: list[Any] = [
        user_pk, words, opts.candidates, memory_type, " ".join(negated_words(words)), websearch_text(words)
    ]  # fmt: skip
    if len(lexical) > 1 and not wants_trigram(words):
        lexical = [r for r in lexical if r != "trigram"]  # long or digit-bearing queries: it does not earn its cost
    if "dense" not in wanted or embeddings is None or not embeddings.available:
        if not lexical:
            return []
        rows = await _fetch(pool, search_sql(lexical, None), base_args, connection)
    else:
        # The query is embedded (model thread or endpoint) while PostgreSQL ranks lexically on one
        # connection; the dense ranking starts on another as soon as the vector exists, without waiting
        # for the lexical one. Both are fused exactly as a single statement would.
        emb = embeddings.embedder
        vector_task = asyncio.create_task(embeddings.query_vector(query))
        lexical_task = asyncio.create_task(
            _fetch(pool, search_sql(lexical, None), base_args, connection) if lexical else _no_rows()
        )
        dense_task: asyncio.Task[list[dict[str, Any]]] | None = None
        try:
            vector = await vector_task
            if vector is not None and emb.dimension is not None:
                dense_args = [
                    *base_args,
                    vector_literal(vector),
                    float(emb.similarity_floor),
                    float(emb.similarity_ceiling),
                ]
                dense_sql = search_sql(["dense"], (emb.model_id, emb.dimension))
                dense_task = asyncio.create_task(_fetch(pool, dense_sql, dense_args))
            lexical_rows = await lexical_task
            dense_rows = await dense_task if dense_task is not None else []
        finally:
            # On cancellation or error, stop what still runs and wait for it: the lexical task may run on the
            # caller's connection, which must not go back to the pool while its query is in flight (the pool
            # would then terminate it). A cancelled query ends with ROLLBACK (see fetch_with_settings).
            pending = [t for t in (vector_task, lexical_task, dense_task) if t is not None and not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        rows = fuse_rows(lexical_rows, dense_rows)
    if opts.fusion == "rrf":
        rows.sort(key=lambda r: (-r["rrf"], -r["score"]))
    if opts.supersede:
        rows = demote_superseded(rows)
    rows = [r for r in rows if r["score"] >= opts.min_score]
    if opts.mmr is not None:
        rows = mmr_rerank(rows, limit, opts.mmr)
    return rows[:limit]


# "-word" excludes a word (websearch syntax), but short dashed tokens are command flags: "df -h", "ls -la".
def wants_trigram(query: str) -> bool:
    """Whether fuzzy trigram matching can add something: short word queries (typos, partial words).

    Long questions are for full-text and dense ranking (the similarity of a whole sentence to a document head
    is weak evidence). Tokens with digits (hashes, ids, IPs, versions) are matched exactly or as prefixes by
    full-text search; fuzzily they would only surface *other* ids that look alike, at a high cost on large
    stores (their trigrams are everywhere).
    """
    words = query.split()
    return 0 < len(words) <= TRIGRAM_MAX_WORDS and not any(ch.isdigit() for ch in query)


_NEGATION_RE = re.compile(r'"[^"]*"|(?:^|\s)-([A-Za-z][\w.\-]{3,})')
_FLAG_RE = re.compile(r"(^|\s)(?:--|-(?=\w[\w\-]{0,2}(?:\s|$)))")
# A dash before no word negates nothing, and PostgreSQL's parser fails on a few dozen of them ("tsquery stack too
# small"): a log separator line (-----) in a pasted query must not break the search.
_LOOSE_DASHES_RE = re.compile(r"-{2,}|-(?=[^\w]|$)")


def negated_words(query: str) -> list[str]:
    """Words excluded with websearch syntax: ``nginx -timeout`` -> ``['timeout']`` (not flags, not in quotes)."""
    return [m[1] for m in _NEGATION_RE.finditer(query) if m[1]]


def websearch_text(query: str) -> str:
    """The query for ``websearch_to_tsquery`` with short command flags kept as words (``df -h`` -> ``df h``)."""
    return _LOOSE_DASHES_RE.sub(" ", _FLAG_RE.sub(r"\1", query))


async def _no_rows() -> list[dict[str, Any]]:
    return []


async def _fetch(
    pool: asyncpg.Pool, sql: str, args: list[Any], connection: Connection | None = None
) -> list[dict[str, Any]]:
    if connection is None:
        async with pool.acquire() as acquired:
            return await fetch_with_settings(acquired, _BEGIN_SQL, sql, *args)
    return await fetch_with_settings(connection, _BEGIN_SQL, sql, *args)


async def fetch_with_settings(conn: Connection, begin_sql: str, sql: str, *args: Any) -> list[dict[str, Any]]:
    """Rows of a read-only ``sql``, run in a transaction that ``begin_sql`` opens with its ``SET LOCAL`` settings.

    The transaction always ends with ROLLBACK (nothing was written): the settings never leak to the pooled
    connection's next user, also when the query is cancelled.
    """
    await conn.execute(begin_sql)
    try:
        rows = await conn.fetch(sql, *args)
    finally:
        await conn.execute("ROLLBACK")
    return [dict(r) for r in rows]
