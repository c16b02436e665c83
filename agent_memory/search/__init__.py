"""The search wing of agent-memory."""

from ._embedders import (
    Embedder,
    EmbeddingError,
    NoEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    embedder_from_settings,
)
from ._hybrid import DEFAULT_MIN_SCORE, MEMORY_ITEM_COLUMNS, SearchOptions, hybrid_search, negated_words
from ._worker import EmbeddingService, embedding_text, vector_index_name, vector_literal

__all__ = [
    "DEFAULT_MIN_SCORE",
    "MEMORY_ITEM_COLUMNS",
    "Embedder",
    "EmbeddingError",
    "EmbeddingService",
    "NoEmbedder",
    "OpenAIEmbedder",
    "SearchOptions",
    "SentenceTransformerEmbedder",
    "embedder_from_settings",
    "embedding_text",
    "hybrid_search",
    "negated_words",
    "vector_index_name",
    "vector_literal",
]
