"""Search: ranking of memories and skills (one fusion module), embedders, and the background vector writer.

The store resolves the user and calls :func:`hybrid_search` with the user's row id (search never sees login
names: the user filter is written once, in the store); :mod:`._fusion` is the one place that turns ranker
evidence into a score, for memory search and skill search alike.
"""

from ._embedders import (
    Embedder,
    EmbeddingError,
    NoEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    embedder_from_settings,
)
from ._embedding_text import embedding_text
from ._fusion import (
    CANDIDATES_PER_RANKER,
    RRF_K,
    TRIGRAM_MAX_WORDS,
    TRIGRAM_THRESHOLD,
    contribution,
    demote_superseded,
    fuse_rows,
    mmr_rerank,
    noisy_or,
)
from ._hybrid import DEFAULT_MIN_SCORE, MEMORY_ITEM_COLUMNS, NOT_EXPIRED, SearchOptions, hybrid_search, negated_words
from ._skills import SKILL_COLUMNS, rank_skills
from ._worker import EmbeddingService, ReindexReport, vector_index_name, vector_literal

__all__ = [
    "CANDIDATES_PER_RANKER",
    "DEFAULT_MIN_SCORE",
    "MEMORY_ITEM_COLUMNS",
    "NOT_EXPIRED",
    "RRF_K",
    "SKILL_COLUMNS",
    "TRIGRAM_MAX_WORDS",
    "TRIGRAM_THRESHOLD",
    "Embedder",
    "EmbeddingError",
    "EmbeddingService",
    "NoEmbedder",
    "OpenAIEmbedder",
    "ReindexReport",
    "SearchOptions",
    "SentenceTransformerEmbedder",
    "contribution",
    "demote_superseded",
    "embedder_from_settings",
    "embedding_text",
    "fuse_rows",
    "hybrid_search",
    "mmr_rerank",
    "negated_words",
    "noisy_or",
    "rank_skills",
    "vector_index_name",
    "vector_literal",
]
