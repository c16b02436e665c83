"""Dense skill search: with an embedder, paraphrases find skills that share no word with the request."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel
from support.skills import procedural_memory

from agent_memory import MemoryStore
from agent_memory.search import Embedder, EmbeddingError
from agent_memory.skills import ProceduralMemory

COUNT_WORDS = "def count_words(text: str) -> int:\n    return len(text.split())\n"
SYNONYMS = {"tally": "count", "tokens": "words", "token": "words", "word": "words", "passage": "text"}


class ConceptEmbedder(Embedder):
    """A small deterministic embedder: words (through a synonym table) hashed into 64 dimensions.

    It stands in for a sentence-embedding model the way the scripted server stands in for an LLM: same interface,
    known behaviour (synonyms land on the same vector coordinates).
    """

    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[int] = []
        self.fail = fail

    @property
    def model_name(self) -> str:
        return "concepts"

    @property
    def dimension(self) -> int:
        return 64

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail:
            raise EmbeddingError("endpoint down")
        self.calls.append(len(texts))
        out = []
        for text in texts:
            vec = [0.0] * 64
            for word in re.findall(r"[a-z]+", text.lower()):
                concept = SYNONYMS.get(word, word)
                vec[int(hashlib.sha256(concept.encode()).hexdigest(), 16) % 64] += 1.0
            norm = math.sqrt(sum(x * x for x in vec)) or 1.0
            out.append([x / norm for x in vec])
        return out

    def _to_config(self) -> BaseModel:
        raise NotImplementedError


def memory(store: MemoryStore, user: str, tmp_path: Path, embedder: Embedder | None) -> ProceduralMemory:
    return procedural_memory(store, user, work_dir=tmp_path, embedder=embedder)


async def test_a_paraphrase_finds_the_skill_only_with_an_embedder(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    lexical = memory(store, user_id, tmp_path, None)
    await lexical.register_skill("count_words", "Count the words of a text", COUNT_WORDS)
    paraphrase = "tally the tokens in this passage"
    assert await lexical.search_skills(paraphrase) == []
    dense = memory(store, user_id, tmp_path, ConceptEmbedder())
    assert [s.name for s in await dense.search_skills(paraphrase)] == ["count_words"]
    assert await dense.search_skills("resize the profile pictures") == []


async def test_skill_vectors_are_written_once_and_renewed_when_the_text_changes(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    embedder = ConceptEmbedder()
    skills = memory(store, user_id, tmp_path, embedder)
    await skills.register_skill("count_words", "Count the words of a text", COUNT_WORDS)
    await skills.search_skills("tally tokens")
    await skills.search_skills("tally tokens again")
    assert embedder.calls == [1, 1, 1]  # query, the skill once, query
    await skills.register_skill("count_words", "Count the words of a passage", COUNT_WORDS)
    await skills.search_skills("tally tokens")
    assert embedder.calls[-2:] == [1, 1]  # query, the changed skill


async def test_a_failing_embedder_falls_back_to_lexical_search(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path, ConceptEmbedder(fail=True))
    await skills.register_skill("count_words", "Count the words of a text", COUNT_WORDS)
    assert [s.name for s in await skills.search_skills("count the words")] == ["count_words"]


async def test_dense_search_stays_within_the_user(
    store: MemoryStore, user_id: str, other_user_id: str, tmp_path: Path
) -> None:
    await memory(store, user_id, tmp_path, None).register_skill("count_words", "Count the words", COUNT_WORDS)
    assert await memory(store, other_user_id, tmp_path, ConceptEmbedder()).search_skills("tally the tokens") == []
